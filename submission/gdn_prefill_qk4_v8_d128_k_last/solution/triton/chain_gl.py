"""The chain launch of the untransposed wgmma rows (cfg chain_mma_v3, on sm_90) in Gluon: the math, workspaces and grid
of chain._gdn_prefill_kernel with ALGO_CHUNK_WS, but the next chunk's tiles (k and q copies, Tm, P) are copied with
cp.async at the top of each step, into the other of two buffers, so their latency hides behind a whole step (Triton's
pipeliner issues them after the step's last dot and waits for them at the next step's top: docs/kernels/prefill.md,
"Where the time goes"). The value tile, the gate vectors, the output and the state slice are loaded and stored in the
wgmma accumulator layout (no layout conversion through shared memory); the state slice's fp16 copy, R, X and
X * decay share one buffer, so two CTAs fit on an SM. GPU only: Gluon has no interpreter (the CPU tests run
chain.py's kernel)."""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

from .shapes import DK, NHK, NHV
from .workspace import _p16_slot


@gluon.jit
def _gdc_wait():
    """Wait for the launch before (programmatic dependent launch): pdl.py's gdc_wait, written for Gluon."""
    gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _cta(cu_ptr, perm_ptr, BV: gl.constexpr, LPT: gl.constexpr, PDL: gl.constexpr):
    """The CTA's sequence n, v-head h, q/k head hq, first value column v0 and tokens [bos, eos): the sequence from
    the prep's rank table (LPT 2; launched early, after waiting for the prep) or in launch order."""
    pid_v = gl.program_id(0)
    pid_nh = gl.program_id(1)
    h = pid_nh % NHV
    hq = h // (NHV // NHK)
    v0 = pid_v * BV
    if PDL and (LPT == 2):
        _gdc_wait()
    if LPT == 2:
        row = perm_ptr + (pid_nh // NHV) * 4
        n = gl.load(row)
        bos = gl.load(row + 1)
        eos = gl.load(row + 2)
    else:
        n = pid_nh // NHV
        bos = gl.load(cu_ptr + n).to(gl.int32)
        eos = gl.load(cu_ptr + n + 1).to(gl.int32)
    return n, h, hq, v0, bos, eos


@gluon.jit
def _tile_buffers(C: gl.constexpr, NP: gl.constexpr = 2):
    """Two buffers (one filled while the other is read) of a chunk's k and q copies [C, DK] and its Tm [C, C], and
    NP of its P [C, C], fp16, laid out for wgmma."""
    SA: gl.constexpr = gl.NVMMASharedLayout.get_default_for([C, DK], gl.float16)
    ST: gl.constexpr = gl.NVMMASharedLayout.get_default_for([C, C], gl.float16)
    k_s = gl.allocate_shared_memory(gl.float16, [2, C, DK], SA)
    q_s = gl.allocate_shared_memory(gl.float16, [2, C, DK], SA)
    t_s = gl.allocate_shared_memory(gl.float16, [2, C, C], ST)
    p_s = gl.allocate_shared_memory(gl.float16, [NP, C, C], ST)
    return k_s, q_s, t_s, p_s


@gluon.jit
def _state_in(ptrs, zeros, HAS_STATE: gl.constexpr, EARLY: gl.constexpr):
    """The state slice at ptrs (zeros, of its shape and layout, without a state). EARLY (launched early, no rank
    table to wait for): the state, an input, is loaded before waiting for the prep."""
    H = zeros
    if HAS_STATE and EARLY:
        H = gl.load(ptrs)
    if EARLY:
        _gdc_wait()
    if HAS_STATE and not EARLY:
        H = gl.load(ptrs)
    return H


@gluon.jit
def _gates(c0, bos, n, h, wp_ptr, C: gl.constexpr):
    """The gate block (gamma, beta, decay to the chunk end, G; fp32, [4 C]) of the chunk at c0, head h."""
    slot = bos // C + n + (c0 - bos) // C
    base = wp_ptr.to(gl.pointer_type(gl.float32))
    return base + (slot * _p16_slot(C) + NHV * C * C + 2 * NHK * C * DK) // 2 + h * (4 * C)    # workspace._g_off


@gluon.jit
def _chunk_regs(c0, bos, eos, n, h, v0, v_ptr, wp_ptr, C: gl.constexpr, BV: gl.constexpr, MMA: gl.constexpr):
    """The chunk at c0's value tile [C, BV] (bf16, rows past eos 0) and its gate vectors gamma, beta, decay to the
    chunk end ([C] each) and exp(G_C), from the prep's gate block; a chunk past the sequence's end reads 0."""
    ROW: gl.constexpr = gl.SliceLayout(1, MMA)
    COL: gl.constexpr = gl.SliceLayout(0, MMA)
    r = gl.arange(0, C, layout=ROW)
    j = gl.arange(0, BV, layout=COL)
    tok = c0 + r
    vmask = (tok < eos)[:, None] & (j < BV)[None, :]
    v = gl.load(v_ptr + tok[:, None] * (NHV * DK) + h * DK + v0 + j[None, :], mask=vmask, other=0.0)
    inside = c0 < eos
    g = _gates(c0, bos, n, h, wp_ptr, C)
    gm = (r < C) & inside
    gam = gl.load(g + r, mask=gm, other=0.0)
    beta = gl.load(g + C + r, mask=gm, other=0.0)
    dec = gl.load(g + 2 * C + r, mask=gm, other=0.0)
    egc = gl.load(g + C - 1, mask=inside, other=0.0)
    return v, gam, beta, dec, egc


@gluon.jit
def _issue(bufs, b, c0, bos, eos, n, h, hq, ws_ptr, wp_ptr, C: gl.constexpr, WITH_P: gl.constexpr = True):
    """cp.async of the chunk at c0's k and q copies, Tm and (WITH_P) P tiles into buffer b of bufs = (k, q, Tm,
    P); nothing is read for a chunk past the sequence's end (the buffers then hold zeros)."""
    k_s, q_s, t_s, p_s = bufs
    LK: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
    LT: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    slot = bos // C + n + (c0 - bos) // C
    lim = gl.where(c0 < eos, C, 0)
    rk = gl.arange(0, C, layout=gl.SliceLayout(1, LK))
    ck = gl.arange(0, DK, layout=gl.SliceLayout(0, LK))
    kq = slot * _p16_slot(C) + NHV * C * C + hq * (2 * C * DK) + rk[:, None] * DK + ck[None, :]
    mk = (rk < lim)[:, None] & (ck < DK)[None, :]
    cp.async_copy_global_to_shared(k_s.index(b), wp_ptr + kq, mask=mk)
    cp.async_copy_global_to_shared(q_s.index(b), wp_ptr + kq + C * DK, mask=mk)
    rt = gl.arange(0, C, layout=gl.SliceLayout(1, LT))
    ct = gl.arange(0, C, layout=gl.SliceLayout(0, LT))
    tile = rt[:, None] * C + ct[None, :]
    mt = (rt < lim)[:, None] & (ct < C)[None, :]
    cp.async_copy_global_to_shared(t_s.index(b), ws_ptr + (slot * NHV + h) * (C * C) + tile, mask=mt)
    if WITH_P:
        cp.async_copy_global_to_shared(p_s.index(b), wp_ptr + slot * _p16_slot(C) + h * (C * C) + tile, mask=mt)
    cp.commit_group()


@gluon.jit
def _gdn_chain_gl(
    q_ptr, k_ptr, v_ptr, s_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, o_ptr, ns_ptr, ws_ptr,
    wp_ptr, perm_ptr, scale, N, NP2: gl.constexpr, LPT: gl.constexpr,
    ALGO: gl.constexpr, C: gl.constexpr, BV: gl.constexpr, SB: gl.constexpr, HAS_STATE: gl.constexpr,
    PREC_QK: gl.constexpr, PREC_F: gl.constexpr, INTERP: gl.constexpr, MMA_V3: gl.constexpr = False,
    PDL: gl.constexpr = False,
):
    """The chain launch of the two-launch wgmma rows (grid (value slices, N * HV)): the arguments of
    chain._gdn_prefill_kernel, of which ALGO (ALGO_CHUNK_WS), SB, the precisions (fp16 dots), INTERP and MMA_V3 are
    not read; LPT 0 or 2 (the prep's rank table)."""
    gl.static_assert(LPT != 1, "the chain ranks no sequences here")
    gl.static_assert(C == 64, "one warp group: C = 64 rows per wgmma")
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BV, 16])
    ROW: gl.constexpr = gl.SliceLayout(1, MMA)
    COL: gl.constexpr = gl.SliceLayout(0, MMA)
    SH: gl.constexpr = gl.NVMMASharedLayout.get_default_for([DK, BV], gl.float16)

    n, h, hq, v0, bos, eos = _cta(cu_ptr, perm_ptr, BV, LPT, PDL)
    kx = gl.arange(0, DK, layout=ROW)
    vx = gl.arange(0, BV, layout=COL)
    s_off = (n * NHV + h) * (DK * DK) + (v0 + vx[None, :]) * DK + kx[:, None]     # H[k, v] = S[v0 + v, k]
    H = _state_in(s_ptr + s_off, gl.zeros([DK, BV], gl.float32, MMA), HAS_STATE, PDL and (LPT != 2))

    k_s, q_s, t_s, p_s = _tile_buffers(C)
    h_s = gl.allocate_shared_memory(gl.float16, [DK, BV], SH)     # H, then R and X * decay (rows < C), X (rows >= C)
    bufs = (k_s, q_s, t_s, p_s)
    _issue(bufs, 0, bos, bos, eos, n, h, hq, ws_ptr, wp_ptr, C)
    v, gam, beta, dec, egc = _chunk_regs(bos, bos, eos, n, h, v0, v_ptr, wp_ptr, C, BV, MMA)
    r = gl.arange(0, C, layout=ROW)
    zero = gl.zeros([C, BV], gl.float32, MMA)
    nch = (eos - bos + C - 1) // C
    for i in range(0, nch):
        c0 = bos + i * C
        b = i % 2
        nv, ngam, nbeta, ndec, negc = _chunk_regs(c0 + C, bos, eos, n, h, v0, v_ptr, wp_ptr, C, BV, MMA)
        cp.wait_group(0)            # this chunk's tiles, copied during the step before
        gl.thread_barrier()         # ... visible to every thread; the other buffer's last readers are done
        _issue(bufs, 1 - b, c0 + C, bos, eos, n, h, hq, ws_ptr, wp_ptr, C)
        kb = k_s.index(b)
        h_s.store(H.to(gl.float16))
        fence_async_shared()
        gl.thread_barrier()
        kh = warpgroup_mma(kb, h_s, zero, is_async=True)
        qh = warpgroup_mma(q_s.index(b), h_s, zero, is_async=True)
        kh = warpgroup_mma_wait(1, deps=[kh])
        R = beta[:, None] * (v.to(gl.float32) - gam[:, None] * kh)
        qh = warpgroup_mma_wait(0, deps=[qh])
        rx = h_s.slice(0, C)
        xs = h_s.slice(C, C)
        rx.store(R.to(gl.float16))
        fence_async_shared()
        gl.thread_barrier()
        x = warpgroup_mma(t_s.index(b), rx, zero)
        xs.store(x.to(gl.float16))
        rx.store((x * dec[:, None]).to(gl.float16))
        fence_async_shared()
        gl.thread_barrier()
        Hn = warpgroup_mma(kb.permute((1, 0)), rx, H * egc, is_async=True)
        O = warpgroup_mma(p_s.index(b), xs, qh * gam[:, None], is_async=True)
        H = warpgroup_mma_wait(1, deps=[Hn])
        O = warpgroup_mma_wait(0, deps=[O])
        tok = c0 + r
        o_off = tok[:, None] * (NHV * DK) + h * DK + v0 + vx[None, :]
        gl.store(o_ptr + o_off, (O * scale).to(gl.bfloat16), mask=(tok < eos)[:, None] & (vx < BV)[None, :])
        v, gam, beta, dec, egc = nv, ngam, nbeta, ndec, negc
    cp.wait_group(0)
    gl.store(ns_ptr + s_off, H)
