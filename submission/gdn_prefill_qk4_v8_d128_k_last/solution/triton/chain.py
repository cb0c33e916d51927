"""The chain: one CTA's serial walk over the chunks of its (sequence, v-head, value slice), carrying the state slice
in registers, and the chain launch (_gdn_prefill_kernel).

The device functions here pass their values in a few tuples:
    io   (q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, o_ptr, ws_ptr, wp_ptr): what a chunk step reads and writes (ws_ptr and
         wp_ptr: the Tm and P workspaces, which only ALGO_CHUNK_WS and _T read)
    cta  (n, bos, eos, h, hq, v0, vcols): sequence n = tokens [bos, eos), v-head h, its q/k head hq, the value slice
         from column v0, of which the first vcols columns carry values (fewer only in the segment launches' mixed
         slices: _gdn_seg_kernel)
    par  (alog, dtb, scale): head h's A_log and dt_bias, and the output scale
    nxt  (v, a, b, qk): a chunk's loads that Triton's pipeliner does not stage, issued a step early (_chunk_in)
    K    (ALGO, C, BV, SB, PREC, INTERP), constexpr: the chunk step's algorithm, chunk length, slice width, Tm block
         size, dot precisions (chunk.py) and whether it runs in Triton's interpreter
"""
import triton
import triton.language as tl

from .chunk import _chunk_apply, _chunk_apply_t, _chunk_p, _chunk_tm
from .gates import _chunk_ab, _gate_vectors, _gates_of
from .pdl import gdc_wait
from .recurrent import _recurrent_chunk
from .shapes import DK, NHK, NHV
from .workspace import _g_off, _kq_off, _slot, _wait_chunks, _wp_off, _ws_off

# ALGO (constexpr) selects the per-chunk algorithm; grid, gating, state I/O and output stores are shared
ALGO_CHUNK = 0          # chunked WY/UT form, Tm and P computed in the CTA (one launch)
ALGO_RECURRENT = 1      # token by token (the ablation, recurrent.py)
ALGO_CHUNK_WS = 2       # Tm and P (and the chunk's k, q and gates, fp16) read from the prep's workspaces
ALGO_CHUNK_WS_T = 3     # ALGO_CHUNK_WS with the state slice held transposed, [BV, K] (cfg "trans")


@triton.jit
def _vo_tile(tok, valid, h, v0, ALGO: tl.constexpr, BV: tl.constexpr):
    """Offsets and mask of a chunk's value-side tile (v in, output out): [BV, C] for ALGO_CHUNK_WS_T, else [C, BV]."""
    vx = tl.arange(0, BV)
    if ALGO == 3:
        off = tok[None, :] * (NHV * DK) + h * DK + v0 + vx[:, None]
        mask = valid[None, :]
    else:
        off = tok[:, None] * (NHV * DK) + h * DK + v0 + vx[None, :]
        mask = valid[:, None]
    return off, mask


@triton.jit
def _slice_off(m, v0, ALGO: tl.constexpr, BV: tl.constexpr, k0=0, KB: tl.constexpr = 0):
    """Offsets of value rows v0 .. v0 + BV of the m-th DK x DK matrix in the state's [V, K] layout, as the
    chain holds its state slice: H[v, k] ([BV, K]) for ALGO_CHUNK_WS_T, else H[k, v] ([K, BV]); with KB,
    of its columns k0 .. k0 + KB only."""
    kx = k0 + tl.arange(0, KB if KB else DK)
    vx = tl.arange(0, BV)
    if ALGO == 3:
        off = (m * DK + v0 + vx[:, None]) * DK + kx[None, :]
    else:
        off = (m * DK + v0 + vx[None, :]) * DK + kx[:, None]
    return off


@triton.jit
def _slice_cols(vcols, ALGO: tl.constexpr, BV: tl.constexpr):
    """Which value columns of a slice (or of a chunk's value-side tile) are below vcols, shaped to broadcast
    against it: [BV, 1] for ALGO_CHUNK_WS_T, else [1, BV]."""
    vx = tl.arange(0, BV)
    if ALGO == 3:
        out = (vx < vcols)[:, None]
    else:
        out = (vx < vcols)[None, :]
    return out


@triton.jit
def _slice_init(v0, vcols, ALGO: tl.constexpr, BV: tl.constexpr):
    """A state slice (layout of _slice_off) whose columns below vcols are 0 and whose column vcols + i is row
    v0 + i of the identity (a segment transition's columns: _gdn_seg_kernel)."""
    kx = tl.arange(0, DK)
    vx = tl.arange(0, BV)
    if ALGO == 3:
        eye = (v0 + vx[:, None] - vcols) == kx[None, :]
    else:
        eye = kx[:, None] == (v0 + vx[None, :] - vcols)
    return tl.where(eye & ~_slice_cols(vcols, ALGO, BV), 1.0, 0.0)


@triton.jit
def _chunk_in(c0, cta, io, K, MIX: tl.constexpr):
    """The chunk at c0's loads that Triton's pipeliner does not stage through shared memory, issued a step early:
    v, a and b as stored, or for ALGO_CHUNK_WS and _T gamma and beta from the prep's gate block; and for
    ALGO_CHUNK qk = (q, k) (a load feeding dots of both operand kinds, as k does, is not pipelined; the other
    ALGOs read the prep's fp16 copies, which are: qk = (0, 0)). With MIX the slice's columns from vcols on read
    v = 0 (a segment transition's columns: _gdn_seg_kernel)."""
    ALGO: tl.constexpr = K[0]
    C: tl.constexpr = K[1]
    BV: tl.constexpr = K[2]
    n, bos, eos, h, hq, v0, vcols = cta
    q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, o_ptr, ws_ptr, wp_ptr = io
    r = tl.arange(0, C)
    tok = c0 + r
    valid = tok < eos
    vo_off, vo_mask = _vo_tile(tok, valid, h, v0, ALGO, BV)
    if MIX:
        vo_mask = vo_mask & _slice_cols(vcols, ALGO, BV)
    v = tl.load(v_ptr + vo_off, mask=vo_mask, other=0.0)
    if ALGO >= 2:
        inside = (c0 + 0 * r) < eos     # a chunk past the sequence's end has no slot
        gp = wp_ptr.to(tl.pointer_type(tl.float32)) + _g_off(_slot(c0, bos, n, C), h, C)
        a = tl.load(gp + r, mask=inside, other=0.0)
        b = tl.load(gp + C + r, mask=inside, other=0.0)
        qk = (0.0, 0.0)
    else:
        a, b = _chunk_ab(a_ptr, b_ptr, tok, valid, h)
        qk_off = tok[:, None] * (NHK * DK) + hq * DK + tl.arange(0, DK)[None, :]
        qk = (tl.load(q_ptr + qk_off, mask=valid[:, None], other=0.0),
              tl.load(k_ptr + qk_off, mask=valid[:, None], other=0.0))
    return v, a, b, qk


@triton.jit
def _step(H, c0, cta, io, par, cur, K, OUT: tl.constexpr):
    """One chunk of C tokens [c0, min(c0 + C, eos)) of a chunked ALGO: the only place where they differ. The chunk's
    unpipelined loads come in as cur, issued by the previous step (_chunk_in). Without OUT (a segment's map,
    _gdn_seg_kernel; ALGO_CHUNK_WS and _T) only the state is carried: no q, P or output."""
    ALGO: tl.constexpr = K[0]
    C: tl.constexpr = K[1]
    BV: tl.constexpr = K[2]
    SB: tl.constexpr = K[3]
    PREC: tl.constexpr = K[4]
    n, bos, eos, h, hq, v0, vcols = cta
    q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, o_ptr, ws_ptr, wp_ptr = io
    alog, dtb, scale = par
    vr, ar, br, qk = cur
    r = tl.arange(0, C)
    tok = c0 + r
    valid = tok < eos
    slot = _slot(c0, bos, n, C)
    q = 0.0
    if ALGO >= 2:       # the prep's fp16 copies of k and q
        kq = _kq_off(slot, hq, C)
        if OUT:
            q = tl.load(wp_ptr + kq + C * DK)
        k = tl.load(wp_ptr + kq)
    else:
        q, k = qk
    vo_off, vo_mask = _vo_tile(tok, valid, h, v0, ALGO, BV)
    v = vr.to(tl.float32)
    G = 0.0
    if ALGO >= 2:       # the gates from the prep's gate block (_g_off)
        gp = wp_ptr.to(tl.pointer_type(tl.float32)) + _g_off(slot, h, C)
        gam = ar
        beta = br
        dec = tl.load(gp + 2 * C + r)
        egC = tl.load(gp + C - 1)       # gamma of the last row
    else:
        lg, beta = _gates_of(ar, br, valid, alog, dtb)
        G = tl.cumsum(lg, axis=0)
        gam, dec, egC = _gate_vectors(G)
    if ALGO == 0:
        Tm = _chunk_tm(k, G, beta, C, SB, PREC[0], PREC[1])
        P = _chunk_p(q, k, G, C, PREC[0])
    else:
        Tm = tl.load(ws_ptr + _ws_off(slot, h, C))
        P = 0.0
        if OUT:
            P = tl.load(wp_ptr + _wp_off(slot, h, C)).to(tl.float32)
    if ALGO == 3:
        O, H = _chunk_apply_t(H, Tm, P, (q, k, v), (gam, beta, dec, egC), scale, PREC, OUT)
    else:
        O, H = _chunk_apply(H, Tm, P, (q, k, v), (gam, beta, dec, egC), scale, PREC, OUT)
    if OUT:
        tl.store(o_ptr + vo_off, O.to(o_ptr.dtype.element_ty), mask=vo_mask)
    return H


@triton.jit
def _advance(H, c0, cta, io, par, nxt, K, OUT: tl.constexpr, MIX: tl.constexpr):
    """One step of _walk: issue chunk c0 + C's unpipelined loads (_chunk_in), then walk chunk c0 on nxt (its own,
    loaded a step earlier); returns the state and the next chunk's loads."""
    C: tl.constexpr = K[1]
    cur = nxt
    nxt = _chunk_in(c0 + C, cta, io, K, MIX)
    H = _step(H, c0, cta, io, par, cur, K, OUT)
    return H, nxt


@triton.jit
def _walk(H, cs, ce, cta, io, par, nxt, K, OUT: tl.constexpr, MIX: tl.constexpr):
    """The state slice H carried over the chunks [cs, ce) of the CTA's sequence: the chain's serial loop. For the
    chunked ALGOs nxt holds chunk cs's unpipelined loads and each step issues the next chunk's before its own work
    (their latency hidden behind a whole step; Triton's pipelining covers only the loads that feed a dot through
    shared memory); MIX as in _chunk_in."""
    ALGO: tl.constexpr = K[0]
    C: tl.constexpr = K[1]
    BV: tl.constexpr = K[2]
    INTERP: tl.constexpr = K[5]
    # The interpreter (numpy >= 2) cannot take a loaded scalar as a range() bound, so under
    # INTERP the same step runs in a while loop; on the GPU a for loop (software-pipelined).
    if INTERP:
        c0 = cs
        while c0 < ce:
            if ALGO == 1:
                H = _recurrent_chunk(H, c0, cta, io, par, C, BV, INTERP)
            else:
                H, nxt = _advance(H, c0, cta, io, par, nxt, K, OUT, MIX)
            c0 += C
    else:
        for c0 in range(cs, ce, C):
            if ALGO == 1:
                H = _recurrent_chunk(H, c0, cta, io, par, C, BV, INTERP)
            else:
                H, nxt = _advance(H, c0, cta, io, par, nxt, K, OUT, MIX)
    return H


@triton.jit
def _longest_first(cu_ptr, r, N, NP2: tl.constexpr):
    """The sequence of rank r with the sequences ordered by length, longest first (ties: lower index
    first). CTAs start in launch order, so the longest serial chains start in the first wave rather
    than possibly the last one."""
    i = tl.arange(0, NP2)
    m = i < N
    ln = tl.load(cu_ptr + i + 1, mask=m, other=0) - tl.load(cu_ptr + i, mask=m, other=0)
    ln = tl.where(m, ln, -1)
    before = (ln[None, :] > ln[:, None]) | ((ln[None, :] == ln[:, None]) & (i[None, :] < i[:, None]))
    rank = tl.sum((before & m[None, :]).to(tl.int32), axis=1)
    return tl.sum(tl.where((rank == r) & m, i, 0), axis=0)


@triton.jit
def _chain(pid_v, pid_nh, io, hp, st, seqs, sync, K, LPT: tl.constexpr, WAIT: tl.constexpr,
           HAS_STATE: tl.constexpr, NP2: tl.constexpr, PDL: tl.constexpr = False):
    """One CTA's serial walk over the chunks of its (sequence, head, value slice): value slice pid_v of row pid_nh
    (sequence or rank * NHV + head). hp = (alog_ptr, dtb_ptr, scale), st = (s_ptr, ns_ptr) the given and the new
    state, seqs = (cu_ptr, perm_ptr, N), sync = (sync_ptr, want, nprep) (fused launch). WAIT (fused launch): the
    number of flag planes to wait on (2: Tm flags, then P flags nprep words further; 0 outside the fused launch). LPT:
    1 ranks the sequences here (_longest_first), 2 reads the rank table the prep launch wrote (prep._rank_sequence).
    PDL: the chain launch after the prep, started early (pdl.py): it waits for the prep before the rank table, or
    else loads its state slice (an input) first."""
    ALGO: tl.constexpr = K[0]
    C: tl.constexpr = K[1]
    BV: tl.constexpr = K[2]
    alog_ptr, dtb_ptr, scale = hp
    s_ptr, ns_ptr = st
    cu_ptr, perm_ptr, N = seqs
    sync_ptr, want, nprep = sync
    h = pid_nh % NHV
    if PDL and (LPT == 2):
        gdc_wait()
    if LPT == 2:
        row = perm_ptr + (pid_nh // NHV) * 4
        n = tl.load(row)
        bos = tl.load(row + 1)
        eos = tl.load(row + 2)
    else:
        if LPT:
            n = _longest_first(cu_ptr, pid_nh // NHV, N, NP2)
        else:
            n = pid_nh // NHV
        bos = tl.load(cu_ptr + n).to(tl.int32)
        eos = tl.load(cu_ptr + n + 1).to(tl.int32)
    hq = h // (NHV // NHK)
    v0 = pid_v * BV
    cta = (n, bos, eos, h, hq, v0, BV)
    nxt = (0.0, 0.0, 0.0, (0.0, 0.0))
    if ALGO == 0:           # the first chunk's, before the state load
        nxt = _chunk_in(bos, cta, io, K, False)
    alog = tl.load(alog_ptr + h).to(tl.float32)
    dtb = tl.load(dtb_ptr + h).to(tl.float32)
    # the k and q copies of head h's chunks come from the prep of the first v-head of its q/k head
    # (prep._prep_slot), so an odd head waits for that head's flags too
    hw = h - h % (NHV // NHK)
    for plane in tl.static_range(WAIT):     # Tm flags, then P flags nprep words further
        _wait_chunks(sync_ptr + plane * nprep, _slot(bos, bos, n, C), (eos - bos + C - 1) // C, h, want)
        if hw != h:
            _wait_chunks(sync_ptr + plane * nprep, _slot(bos, bos, n, C), (eos - bos + C - 1) // C, hw, want)
    s_off = _slice_off(n * NHV + h, v0, ALGO, BV)
    H = _slice_init(v0, BV, ALGO, BV)
    EARLY: tl.constexpr = PDL and (LPT != 2)
    if HAS_STATE and EARLY:
        H = tl.load(s_ptr + s_off)
    if EARLY:
        gdc_wait()
    if ALGO >= 2:           # after the waits: the gate block is the prep's
        nxt = _chunk_in(bos, cta, io, K, False)
    if HAS_STATE and not EARLY:
        H = tl.load(s_ptr + s_off)

    H = _walk(H, bos, eos, cta, io, (alog, dtb, scale), nxt, K, True, False)
    tl.store(ns_ptr + s_off, H)


@triton.jit
def _gdn_prefill_kernel(
    q_ptr, k_ptr, v_ptr, s_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, o_ptr, ns_ptr, ws_ptr,
    wp_ptr, perm_ptr, scale, N, NP2: tl.constexpr, LPT: tl.constexpr,
    ALGO: tl.constexpr, C: tl.constexpr, BV: tl.constexpr, SB: tl.constexpr, HAS_STATE: tl.constexpr,
    PREC_QK: tl.constexpr, PREC_F: tl.constexpr, INTERP: tl.constexpr, MMA_V3: tl.constexpr = False,
    PDL: tl.constexpr = False,
):
    """The chain launch (and the one-launch and recurrent rows): grid (value slices, N * HV), slices of one head
    adjacent (they share q/k). MMA_V3 (cfg "chain_mma_v3") is not read: it keys Triton's in-process cache, which
    ignores the env knobs that pick the lowering (lowering.launch_env). PDL: launched after the prep (pdl.py)."""
    K: tl.constexpr = (ALGO, C, BV, SB, (PREC_QK, PREC_F), INTERP)
    _chain(tl.program_id(0), tl.program_id(1), (q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, o_ptr, ws_ptr, wp_ptr),
           (alog_ptr, dtb_ptr, scale), (s_ptr, ns_ptr), (cu_ptr, perm_ptr, N), (ws_ptr, 0, 0), K, LPT, 0,
           HAS_STATE, NP2, PDL)
