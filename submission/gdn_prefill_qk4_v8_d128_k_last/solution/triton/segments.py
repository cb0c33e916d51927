"""cfg "segs": the chain's walk cut into segments walked in parallel by two launches after the prep (_gdn_seg_kernel).
A segment's state map is affine, H_end = A H_start + B, so the first launch finds A and B of each segment and the
second walks every later segment from its start state composed from those maps."""
import triton
import triton.language as tl

from .chain import _chunk_in, _slice_cols, _slice_init, _slice_off, _walk
from .chunk import _mm
from .pdl import gdc_launch_dependents, gdc_wait
from .shapes import DK, NHK, NHV


@triton.jit
def _seg_start(mats, m0, v0, j, mine, PREC_C: tl.constexpr, ALGO: tl.constexpr, BV: tl.constexpr):
    """The state slice at the start of segment j >= 1, A_{j-1}( .. (A_1 E_0 + B_1) ..) + B_{j-1}, from mats =
    (e_ptr, x_ptr, h_ptr) (_gdn_seg_kernel). Each product is summed over KB-column blocks of the slice, read back
    from memory (E_0, then this CTA's own slot `mine` of h_ptr), so no 128 x 128 operand is held in registers."""
    e_ptr, x_ptr, h_ptr = mats
    KB: tl.constexpr = 32
    MAT: tl.constexpr = DK * DK
    r = tl.arange(0, KB)
    kx = tl.arange(0, DK)
    src = e_ptr + m0 * MAT
    i = 1
    while i < j:
        acc = tl.load(e_ptr + (m0 + i * NHV) * MAT + _slice_off(0, v0, ALGO, BV))       # B_i
        x = x_ptr + (m0 + i * NHV) * MAT
        for k0 in tl.static_range(0, DK, KB):
            hb = tl.load(src + _slice_off(0, v0, ALGO, BV, k0, KB))
            if ALGO == 3:   # H^T A^T = H^T X: rows k0 .. k0 + KB of X
                acc += _mm(hb, tl.load(x + (k0 + r[:, None]) * DK + kx[None, :]), PREC_C)
            else:           # A H, A[k, l] = X[l, k]: columns k0 .. k0 + KB of A
                acc += _mm(tl.load(x + (k0 + r[None, :]) * DK + kx[:, None]), hb, PREC_C)
        tl.debug_barrier()      # every thread's reads of src before the slot is overwritten
        src = h_ptr + mine * MAT
        tl.store(src + _slice_off(0, v0, ALGO, BV), acc)
        tl.debug_barrier()      # and its stores before the next product reads them
        i += 1
    return tl.load(src + _slice_off(0, v0, ALGO, BV))


@triton.jit
def _gdn_seg_kernel(
    q_ptr, k_ptr, v_ptr, s_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, o_ptr, ns_ptr, ws_ptr, wp_ptr,
    e_ptr, x_ptr, h_ptr, scale, PHASE: tl.constexpr, NSEG: tl.constexpr, ALGO: tl.constexpr,
    C: tl.constexpr, BV: tl.constexpr, SB: tl.constexpr, HAS_STATE: tl.constexpr, PREC_QK: tl.constexpr,
    PREC_F: tl.constexpr, PREC_C: tl.constexpr, INTERP: tl.constexpr, MMA_V3: tl.constexpr = False,
    PDL: tl.constexpr = False,
):
    """cfg "segs" (NSEG >= 3): each sequence cut into NSEG segments of whole chunks, walked in parallel by
    two launches after the prep launch (ALGO_CHUNK_WS or _T). The state map of a segment is affine,
    H_end = A H_start + B, with A [K, K] shared by every value column of a head.

    PHASE 1, grid (2 * DK // BV, N * (NSEG - 1), HV): segment 0 from the given state (CTAs pid < DK // BV), with
    its outputs, storing its end state E_0 (and new_state if the sequence ends there); segments j = 1 .. NSEG - 2
    without outputs, each CTA on BV / 2 value columns from a zero state (B_j, stored as E_j) and, in the same
    slice, BV / 2 rows of the identity with v = 0 (columns of A_j, stored as X_j = A_j^T in the state's layout):
    twice the columns per CTA, so the launch's CTAs fit on the GPU at once where slices of one kind each would make
    a second wave. The last segment's map is never needed.
    PHASE 2, grid (DK // BV, N * (NSEG - 1), HV): segment j = 1 .. NSEG - 1 starts from
    H = A_{j-1}( .. (A_1 E_0 + B_1) ..) + B_{j-1} (dots in PREC_C) and walks with its outputs; the
    sequence's last non-empty segment stores new_state. The serial length is ~2 / NSEG of the chain's.
    PDL: launched early after the launch before (pdl.py); it waits for that launch before the first read of what
    the prep or PHASE 1 wrote, and PHASE 1 lets PHASE 2 start early in turn."""
    if PDL and (PHASE == 1):
        gdc_launch_dependents()
    K: tl.constexpr = (ALGO, C, BV, SB, (PREC_QK, PREC_F), INTERP)
    io = (q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, o_ptr, ws_ptr, wp_ptr)
    pid = tl.program_id(0)
    n = tl.program_id(1) // (NSEG - 1)
    j = tl.program_id(1) % (NSEG - 1) + (PHASE - 1)
    h = tl.program_id(2)
    hq = h // (NHV // NHK)
    bos = tl.load(cu_ptr + n).to(tl.int32)
    eos = tl.load(cu_ptr + n + 1).to(tl.int32)
    per = ((eos - bos + C - 1) // C + NSEG - 1) // NSEG * C      # tokens per segment, whole chunks
    cs = bos + j * per
    ce = tl.minimum(cs + per, eos)
    mixed = (PHASE == 1) & (j > 0)      # half value columns, half transition columns
    vcols = tl.where(mixed, BV // 2, BV)
    v0 = pid * vcols
    cta = (n, bos, eos, h, hq, v0, vcols)
    if PDL:
        gdc_wait()
    # segment 0 runs even for an empty sequence: it stores that sequence's new_state (the given state)
    if ((cs < eos) | ((PHASE == 1) & (j == 0))) & (v0 < DK):
        nxt = _chunk_in(cs, cta, io, K, PHASE == 1)
        alog = tl.load(alog_ptr + h).to(tl.float32)
        dtb = tl.load(dtb_ptr + h).to(tl.float32)
        par = (alog, dtb, scale)
        s_off = _slice_off(n * NHV + h, v0, ALGO, BV)
        m0 = (n * (NSEG - 1)) * NHV + h                      # segment i's E / X: matrix m0 + i * NHV
        e_off = _slice_off(m0, v0, ALGO, BV)
        if PHASE == 1:
            H = _slice_init(v0, vcols, ALGO, BV)
            if HAS_STATE:
                if j == 0:
                    H = tl.load(s_ptr + s_off)
            if j > 0:
                H = _walk(H, cs, ce, cta, io, par, nxt, K, False, True)
                cols = _slice_cols(vcols, ALGO, BV)
                m = (m0 + j * NHV) * DK * DK
                tl.store(e_ptr + m + _slice_off(0, v0, ALGO, BV), H, mask=cols)            # B_j
                tl.store(x_ptr + m + _slice_off(0, v0 - vcols, ALGO, BV), H, mask=~cols)  # A_j^T
        else:
            H = _seg_start((e_ptr, x_ptr, h_ptr), m0, v0, j, tl.program_id(1) * NHV + h, PREC_C, ALGO, BV)
        if (PHASE == 2) | (j == 0):
            # a slice of value columns only (vcols == BV here)
            H = _walk(H, cs, ce, (n, bos, eos, h, hq, v0, BV), io, par, nxt, K, True, PHASE == 1)
            if PHASE == 1:
                tl.store(e_ptr + e_off, H)
            if ce >= eos:
                tl.store(ns_ptr + s_off, H)
