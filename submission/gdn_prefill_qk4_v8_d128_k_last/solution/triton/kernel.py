"""Gated DeltaNet prefill (qk4 / v8 / d128, k-last fp32 state): chunkwise WY/UT kernel in Triton.

Definition: gdn_prefill_qk4_v8_d128_k_last. Destination-passing style:

    kernel(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state) -> None

q/k [T,4,128] bf16, v [T,8,128] bf16, a/b [T,8] bf16, A_log/dt_bias [8] fp32, cu_seqlens [N+1]
int64 (read only on the device), state [N,8,128,128] fp32 k-last ([N, HV, V, K]); output
[T,8,128] bf16 and new_state [N,8,128,128] fp32 are preallocated by the caller and fully
written here. Inputs are never written. v-head h reads q/k head h // 2.

One CTA per (sequence n, v-head h, slice of BV value columns). It keeps the state slice
H = S^T [K=128, BV] in fp32 registers across all chunks of its sequence and walks the
sequence in chunks of C tokens. Per chunk (G = in-chunk cumulative log gate, gamma = exp(G),
never divided by; every ratio is exp(G_r - G_s) <= 1):

    A   = strict_lower(beta_r exp(G_r - G_s) k_r.k_s)        [C, C]
    Tm  = (I + A)^-1            diagonal SBxSB blocks by forward substitution, then doubling
                                merges Tm_2s = Tm_s - Tm_s (E_s Tm_s)   (exact block formula)
    R   = beta * (V - gamma * (K H))                        [C, BV]
    X   = Tm R                  (= U - W H of the WY form, without materialising W)
    O   = scale * (gamma * (Q H) + ((Q K^T) o M) X)           M[r,s] = exp(G_r - G_s), s <= r
    H  <- exp(G_C) H + K^T (exp(G_C - G) * X)

Every contraction is a tl.dot on tensor cores with fp32 accumulation: K K^T and Q K^T on the bf16 inputs, every
other dot (K H, Q H, Tm R, P X, K^T X and the Tm merges) on fp16 operands (11-bit significand, as precise as tf32;
max errors vs float64 on 31 contest shapes: output 0.0010, state 0.0008). The rows with a workspace (cfg ws) store Tm
and P in fp16, and the prep also writes fp16 copies of each chunk's k and q (exact but for entries below 2^-14,
rounded to a multiple of 2^-24) and the gates the chain needs. fp16's range (+-65504) bounds the state and the new
values: far above what unit-norm keys with a delta rule produce. The dots are lowered to mma.sync except where a
config enables wgmma (lowering.py). Gates are computed in the kernel; varlen via cu_seqlens read in the kernel; the
partial last chunk of a sequence is masked (masked rows get k = q = v = 0, beta = 0, log-gate = 0, so they are
inert).

`kernel` picks one of four launch structures from the launch table (launch_table.py, measured on an H200): one
launch (ALGO_CHUNK), the prep and the chain as two launches or as two roles of one launch (fused), or the prep and
two segment launches; `kernel_recurrent` runs the ablation (ALGO_RECURRENT) through the same launcher. Every launch
of a call is bound (and compiled if new) before the first is issued, so only bare driver launches sit between them
(the official timer charges host time between a call's kernels).

Modules (siblings of this file, imported relatively: the builder imports this file as a package module):
    shapes.py        head counts and head size
    launch_table.py  the launch configs and the table that picks one
    lowering.py      mma.sync or wgmma: the compile-time env knobs around each launch
    gates.py         per-token gates and the gate vectors of a chunk
    chunk.py         the chunk step's math: dot precisions, Tm, P, the state update
    workspace.py     the prep's workspace layout and the fused launch's flag waits
    prep.py          the prep launch: Tm and P of every (chunk, head)
    chain.py         the serial walk of one (sequence, head, value slice) and the chain launch
    chain_gl.py      the chain launch of the untransposed wgmma rows in Gluon (sm_90; BV = 32)
    chain_glt.py     the same at BV = 64, the state slice held transposed (register operands)
    recurrent.py     the ablation's token-by-token step
    segments.py      the segment launches (cfg segs)
    fused.py         the fused launch (cfg fused)
    pdl.py           programmatic dependent launch between the launches of one call

Under TRITON_INTERPRET=1 (tensors on the CPU) all dots run on fp32 operands ("ieee"), because
the interpreter's bf16 tl.dot is wrong; on the GPU the operand precisions are the PREC_*
constexprs (chunk.py).
"""
import functools
import math
import re
import warnings

import torch
import triton

from .chain import ALGO_CHUNK, ALGO_CHUNK_WS, ALGO_CHUNK_WS_T, ALGO_RECURRENT, _gdn_prefill_kernel
from .chunk import P_BF16, P_FP16, P_IEEE, P_TF32X3
from .fused import _gdn_fused_kernel
from .launch_table import LPT_MIN_N, RECURRENT, pick, table_here
from .lowering import has_gluon_chain, has_wgmma, launch_env
from .pdl import has_pdl
from .prep import _gdn_prep_kernel
from .segments import _gdn_seg_kernel
from .shapes import D, HV
from .workspace import p16_slot_numel

_DEFAULT_SCALE = 1.0 / math.sqrt(D)
_WORKSPACES = {}
_BIND_FIRST = True


def _triton_version(version):
    return tuple(int(x) for x in re.findall(r"\d+", version)[:2])


def _triton_passes_constexprs(version):
    """Triton >= 3.3 hands a compiled kernel's launcher every argument, constexprs included (what the
    bound-first launch below does); earlier versions hand it the non-constexpr ones only, so there the
    plain launch path is used: correct, with the host time between the two launches."""
    return _triton_version(version) >= (3, 3)


_LAUNCH_BOUND = _triton_passes_constexprs(triton.__version__)


def _workspace(name, numel, dtype, device, zero=False):
    """A workspace of the launches with a prep (Tm, P; the fused launch's sync words, zeroed when made; the segment
    launches' matrices), kept between calls (grown when a call needs more): no allocation in the call. Every
    slot a launch reads was written by an earlier launch (or role) of the same call, or, for the segments'
    running products, by the same CTA, so what a previous call left there is never read. Calls are assumed
    to run on one stream at a time."""
    key = (name, str(device), dtype)
    buf = _WORKSPACES.get(key)
    if buf is None or buf.numel() < numel:
        buf = (torch.zeros if zero else torch.empty)((numel,), dtype=dtype, device=device)
        _WORKSPACES[key] = buf
    return buf[:numel]


def _precisions(on_gpu, one_launch):
    """The dots' operand precisions (chunk.py): exact fp32 in the interpreter, whose bf16 tl.dot is wrong; on the GPU
    fp16 for every dot but K K^T and Q K^T of a prep (bf16, the inputs' own precision). The one-launch rows take
    those two on fp16 too: exact for bf16 inputs in fp16's normal range, which their other dots on k and q already
    assume, and k and q then take one conversion each (measured faster below 180 tokens, docs/kernels/prefill.md)."""
    if not on_gpu:
        return dict(PREC_QK=P_IEEE, PREC_F=P_IEEE)
    return dict(PREC_QK=P_FP16 if one_launch else P_BF16, PREC_F=P_FP16)


@functools.lru_cache(maxsize=None)
def _gluon_chain(BV):
    """The Gluon chain launch of the untransposed wgmma rows: chain_glt.py at BV = 64, chain_gl.py at BV = 32. Imported
    here, where an sm_90 call needs it, so that no other GPU's path depends on the Gluon API of the Triton at hand."""
    if BV == 64:
        from .chain_glt import _gdn_chain_glt
        return _gdn_chain_glt
    from .chain_gl import _gdn_chain_gl
    return _gdn_chain_gl


def _launch(algo, q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state, cfg=None):
    """Run the call with launch config `cfg` (default: the row of this GPU's table, launch_table.table_here, or
    RECURRENT for ALGO_RECURRENT); returns the last launch's compiled kernel on the GPU, None in the interpreter."""
    T = q.shape[0]
    N = cu_seqlens.numel() - 1
    scale = float(scale) if scale is not None else 0.0
    if scale == 0.0:
        scale = _DEFAULT_SCALE
    if cfg is None:
        cfg = RECURRENT if algo == ALGO_RECURRENT else pick(T, N, table_here(q.device))
    on_gpu = q.is_cuda
    if on_gpu and cfg.no_wgmma is not None and not has_wgmma(q.device):
        cfg = cfg.no_wgmma
    C = cfg.C
    BV = cfg.BV
    SB = min(cfg.SB, C)
    use_ws = algo == ALGO_CHUNK and cfg.ws
    p = _precisions(on_gpu, one_launch=not use_ws)
    has_state = state is not None
    s_arg = state if has_state else new_state
    ws = new_state  # dummy pointers when unused
    wp = output
    if use_ws:
        nslot = T // C + N + 1
        # Tm in fp16; P in fp16, beside it the chunks' k and q as fp16 copies and their gates (workspace.py)
        ws = _workspace("tm16", nslot * HV * C * C, torch.float16, q.device)
        wp = _workspace("p16", nslot * p16_slot_numel(C), torch.float16, q.device)
    np2 = max(2, triton.next_power_of_2(N))
    lpt = cfg.lpt if cfg.lpt is not None else N >= LPT_MIN_N
    chain_opts = dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    prep_opts = dict(num_warps=4, num_stages=1)
    fused = use_ws and cfg.fused
    chain_algo = ALGO_CHUNK_WS_T if cfg.trans else ALGO_CHUNK_WS
    segs = cfg.segs if use_ws and not fused else 0     # two segment launches (segments.py)
    if segs and segs < 3:
        raise ValueError(f"gdn prefill: launch config {cfg}: segs needs >= 3 segments")
    # the prep launch ranks the sequences for the chain launch (two launches, longest first)
    rank = bool(lpt and use_ws and not fused and not segs)
    # the chain's arguments, shared by the plain chain launch and the fused launch's chain role
    chain_args = dict(
        q_ptr=q, k_ptr=k, v_ptr=v, s_ptr=s_arg, alog_ptr=A_log, a_ptr=a, dtb_ptr=dt_bias,
        b_ptr=b, cu_ptr=cu_seqlens, o_ptr=output, ns_ptr=new_state, ws_ptr=ws, wp_ptr=wp,
        scale=scale, N=N, NP2=np2, LPT=lpt, C=C, BV=BV, SB=SB, HAS_STATE=has_state, INTERP=not on_gpu, **p)
    launches = []   # (jit function, grid, every argument by name, launch options)
    one_per_sm = None   # the launch that runs one CTA an SM (cfg.seg_one_per_sm)
    if fused:
        nvb = D // BV
        # Tm and P of each (slot, head) by tickets of their own, each with its flag (fused.py)
        sync = _workspace("sync", 3 + 2 * nslot * HV, torch.int32, q.device, zero=True)
        launches.append((_gdn_fused_kernel, (2 * nslot * HV + nvb * N * HV, 1, 1), dict(
            chain_args, sync_ptr=sync, NPREP=nslot * HV, NVB=nvb, CHAIN_ALGO=chain_algo,
            MMA_V3=cfg.prep_mma_v3), chain_opts))
    else:
        perm = _workspace("perm", 4 * N, torch.int32, q.device) if rank else cu_seqlens   # else a dummy
        # the untransposed wgmma rows' chain is in Gluon (off sm_90 cfg is no_wgmma, never chain_mma_v3); at
        # BV = 64 it computes each chunk's P itself (chain_glt.py), so its prep writes none
        gluon = (on_gpu and use_ws and not segs and cfg.chain_mma_v3 and chain_algo == ALGO_CHUNK_WS
                 and has_gluon_chain())
        ws_p = not (gluon and BV == 64)
        if use_ws:
            launches.append((_gdn_prep_kernel, (nslot, HV, 2), dict(
                q_ptr=q, k_ptr=k, alog_ptr=A_log, a_ptr=a, dtb_ptr=dt_bias, b_ptr=b, cu_ptr=cu_seqlens,
                ws_ptr=ws, wp_ptr=wp, perm_ptr=perm, N=N, C=C, SB=SB, NP2=np2, PREC_QK=p["PREC_QK"],
                PREC_F=p["PREC_F"], MMA_V3=cfg.prep_mma_v3, RANK=rank, WS_P=ws_p), prep_opts))
            algo = chain_algo
        if segs:
            mats = N * (segs - 1) * HV * D * D      # segment end states E and transitions X (A^T)
            seg_args = {name: chain_args[name] for name in _gdn_seg_kernel.arg_names if name in chain_args}
            seg_args.update(e_ptr=_workspace("seg_e", mats, torch.float32, q.device), ALGO=algo,
                            x_ptr=_workspace("seg_x", mats, torch.float32, q.device), NSEG=segs,
                            h_ptr=_workspace("seg_h", mats, torch.float32, q.device),
                            PREC_C=P_TF32X3 if on_gpu else P_IEEE, MMA_V3=cfg.chain_mma_v3)
            # the first segment launch's slices are half value, half transition columns: twice as many CTAs
            launches.append((_gdn_seg_kernel, (2 * D // BV, N * (segs - 1), HV), dict(seg_args, PHASE=1),
                             chain_opts))
            launches.append((_gdn_seg_kernel, (D // BV, N * (segs - 1), HV), dict(seg_args, PHASE=2), chain_opts))
            if cfg.seg_one_per_sm:
                one_per_sm = len(launches) - 1
        else:
            launches.append((_gluon_chain(BV) if gluon else _gdn_prefill_kernel, (D // BV, N * HV, 1),
                             dict(chain_args, perm_ptr=perm, LPT=2 if rank else lpt, ALGO=algo,
                                  MMA_V3=cfg.chain_mma_v3), chain_opts))
    if not on_gpu:
        for fn, grid, args, opts in launches:
            fn[grid](**args, **opts)
        return None
    _dependent_launches(launches, has_pdl(q.device))
    # Bind and look up (or compile) every launch, and build each one's argument list (tensors as raw
    # device pointers, which the launcher takes as they are), before issuing the first; then launch
    # the compiled kernels back to back: the official timer charges host time between a call's
    # kernels, not before its first. Triton's full launch path between prep and chain left a
    # gap of ~25 us (H200, Triton 3.6), more than the prep's GPU time below ~2000 tokens.
    if _BIND_FIRST and _LAUNCH_BOUND:
        compiled, argvs = [], []
        for fn, grid, args, opts in launches:
            with launch_env(args.get("MMA_V3", False)):
                compiled.append(fn.warmup(grid=grid, **args, **opts))
            argvs.append([_raw(name, args[name], q.device) for name in fn.arg_names])
        stream = torch.cuda.current_stream(q.device).cuda_stream
        ready = [_issue(kernel, grid, stream, argv, _over_half_an_sm(q.device) if j == one_per_sm else 0)
                 for j, (kernel, (_, grid, _, _), argv) in enumerate(zip(compiled, launches, argvs))]
        for launch, argv in ready:
            launch(*argv)
    else:   # the plain path (Triton < 3.3)
        compiled = []
        for fn, grid, args, opts in launches:
            with launch_env(args.get("MMA_V3", False)):
                compiled.append(fn[grid](**args, **opts))
    return compiled[-1]


def _issue(kernel, grid, stream, argv, shared=0):
    """(launch, arguments): a call that issues the compiled `kernel` on `grid` and `stream`, with at least `shared`
    bytes of shared memory a CTA (more than the kernel uses: fewer CTAs an SM). Where Triton's launcher has
    the layout this was written against (Triton 3.6: CompiledKernel.run is a CudaLauncher whose C function `launch`
    takes the grid, stream, function, cooperative and PDL flags and two scratch buffers, then what the runner of
    CompiledKernel.__getitem__ passes), that C function with every argument bound: the Python layers between (the
    runner, launch metadata, the launch hook chains, scratch allocation) cost host time, which the official timer
    charges between a call's launches (docs/kernels/prefill.md, "Where the time goes (two or three launches ...)":
    22 us from the prep's launch call to the chain's with Triton's runner, one H100 under CUPTI). Otherwise
    (launch hooks set, e.g. a profiler; scratch memory; another launcher) Triton's runner, with a warning."""
    launcher = kernel.run
    why = _lean_refused(launcher)
    if why:
        _warn_once(f"gdn prefill: Triton's launch path between launches ({why}); correct, but the host time between "
                   "a call's launches is charged by the official timer" + (", and no CTA reserves more shared "
                                                                           "memory than it uses" if shared else ""))
        run = kernel[grid]
        return (lambda *a: run(*a, stream=stream)), argv
    num_warps, num_ctas, own = kernel.packed_metadata
    if shared > own and own <= 48 * 1024:
        # Triton lifts a function's dynamic shared memory limit to the GPU's maximum only for kernels using more
        # than 48 KB; below, a launch asking for more would fail
        _warn_once(f"gdn prefill: {kernel.name} uses {own} bytes of shared memory, so no launch of it may reserve "
                   f"{shared}; it runs with its own")
    elif shared > own:
        own = shared
    return launcher.launch, (*grid, stream, kernel.function, launcher.launch_cooperative_grid, launcher.launch_pdl,
                             None, None, (num_warps, num_ctas, own), None, None, None, *argv)


@functools.lru_cache(maxsize=None)
def _over_half_an_sm(device):
    """Bytes of shared memory a CTA that must run alone on its SM reserves: over half of what an SM has."""
    return torch.cuda.get_device_properties(device).shared_memory_per_multiprocessor // 2 + 1


def _lean_refused(launcher):
    """Why a bare call of `launcher`'s C function would not do what Triton's runner does, or None."""
    if _triton_version(triton.__version__) != (3, 6):
        return f"Triton {triton.__version__}: its launcher's arguments were checked on 3.6 only"
    if not all(hasattr(launcher, n) for n in ("launch", "launch_cooperative_grid", "launch_pdl",
                                               "global_scratch_size", "profile_scratch_size")):
        return f"unknown launcher {type(launcher).__name__}"
    if launcher.global_scratch_size or launcher.profile_scratch_size:
        return "the kernel needs scratch memory"
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    for name in ("launch_enter_hook", "launch_exit_hook"):
        hook = getattr(runtime, name, "absent")
        if hook is not None and getattr(hook, "calls", None) != []:
            return f"triton.knobs.runtime.{name} is set" if hook != "absent" else "no triton.knobs"
    return None


@functools.lru_cache(maxsize=None)
def _warn_once(message):
    warnings.warn(message, stacklevel=3)


def _dependent_launches(launches, pdl):
    """Programmatic dependent launch between the launches of a call of two or three, where the GPU and Triton have it
    (pdl.py): each takes PDL (the prep and the first segment launch let the next launch start, a chain or segment
    launch waits for the launch before it), and every launch but the first is a dependent launch."""
    pdl = pdl and len(launches) > 1
    for i, (fn, grid, args, opts) in enumerate(launches):
        if "PDL" in fn.arg_names:      # the fused launch has none
            args["PDL"] = pdl
        if pdl and i > 0:
            launches[i] = (fn, grid, args, dict(opts, launch_pdl=True))


def _raw(name, x, device):
    """A launch argument as the compiled launcher takes it without a call back into Python. The launcher
    does not check a raw pointer, so a tensor on another device is refused here."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.device != device:
        raise ValueError(f"gdn prefill: {name} is on {x.device}, the call runs on {device}")
    return x.data_ptr()


def _c(x):
    return x if x is None or x.is_contiguous() else x.contiguous()


def kernel(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state):
    """Chunked (tensor-core) GDN prefill; writes output and new_state in place."""
    _launch(ALGO_CHUNK, _c(q), _c(k), _c(v), _c(state), _c(A_log), _c(a), _c(dt_bias), _c(b),
            cu_seqlens, scale, output, new_state)


def kernel_recurrent(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output,
                     new_state):
    """Ablation: same launch path, token-by-token register recurrence (no tensor cores)."""
    _launch(ALGO_RECURRENT, _c(q), _c(k), _c(v), _c(state), _c(A_log), _c(a), _c(dt_bias),
            _c(b), cu_seqlens, scale, output, new_state)
