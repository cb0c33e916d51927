"""cfg "fused": the prep and the chain as two roles of one launch (_gdn_fused_kernel), ordered by tickets, per-chunk
flags and spin-waits: no host time between the roles, and chains can start while later chunks are still prepared."""
import triton
import triton.language as tl

from .chain import _chain
from .prep import _prep_slot
from .shapes import NHV


@triton.jit
def _gdn_fused_kernel(
    q_ptr, k_ptr, v_ptr, s_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, o_ptr, ns_ptr, ws_ptr,
    wp_ptr, sync_ptr, scale, N, NPREP, NVB, NP2: tl.constexpr, LPT: tl.constexpr,
    CHAIN_ALGO: tl.constexpr, C: tl.constexpr, BV: tl.constexpr, SB: tl.constexpr, HAS_STATE: tl.constexpr,
    PREC_QK: tl.constexpr, PREC_F: tl.constexpr, INTERP: tl.constexpr, MMA_V3: tl.constexpr = False,
):
    """Both roles of the two-launch variant in one launch.

    sync (int32, zeroed when allocated): [0] ticket counter, [1] done counter, [2] epoch E,
    [3 + t] the flag of prep ticket t. Each CTA draws a ticket: tickets below NPREP compute Tm of
    slot t // HV, head t % HV, the next NPREP tickets P of the same (slot, head), and each then sets
    its flag to E + 1; the others run a chain, which first waits for both flags of each of its
    sequence's chunks. A CTA only waits for CTAs that drew smaller tickets, so these are resident or
    done: no deadlock, whatever order the hardware starts CTAs in. The last CTA to finish zeroes the
    counters and stores E + 1, so the next call waits for E + 2 and flags left by this call never
    satisfy it; no host state, so a captured CUDA graph replays correctly too.
    MMA_V3 (cfg "prep_mma_v3"): as in prep._gdn_prep_kernel (with the transposed chain the chain role's dots have
    BV = 16 or 32 rows, too few for wgmma, so they stay mma.sync either way; the untransposed chain role's are
    wgmma too).
    """
    PLANES: tl.constexpr = 2    # flag planes: Tm, then P
    want = tl.atomic_add(sync_ptr + 2, 0) + 1
    t = tl.atomic_add(sync_ptr, 1)
    if t < PLANES * NPREP:
        io = (q_ptr, k_ptr, a_ptr, b_ptr, ws_ptr, wp_ptr)
        tp = t % NPREP
        if t < NPREP:
            _prep_slot(tp // NHV, tp % NHV, io, (alog_ptr, dtb_ptr), cu_ptr, N, True, C, SB, NP2, (PREC_QK, PREC_F),
                       True, False)
        else:
            _prep_slot(tp // NHV, tp % NHV, io, (alog_ptr, dtb_ptr), cu_ptr, N, False, C, SB, NP2, (PREC_QK, PREC_F),
                       True, False)
        tl.debug_barrier()      # every thread's workspace stores before the releasing flag store
        tl.atomic_xchg(sync_ptr + 3 + t, want, sem="release")
    else:
        u = t - PLANES * NPREP  # CHAIN_ALGO: ALGO_CHUNK_WS or ALGO_CHUNK_WS_T
        K: tl.constexpr = (CHAIN_ALGO, C, BV, SB, (PREC_QK, PREC_F), INTERP)
        _chain(u % NVB, u // NVB, (q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, o_ptr, ws_ptr, wp_ptr),
               (alog_ptr, dtb_ptr, scale), (s_ptr, ns_ptr), (cu_ptr, cu_ptr, N), (sync_ptr, want, NPREP), K, LPT,
               PLANES, HAS_STATE, NP2)
    total = PLANES * NPREP + NVB * N * NHV
    if tl.atomic_add(sync_ptr + 1, 1) == total - 1:
        tl.atomic_xchg(sync_ptr, 0)
        tl.atomic_xchg(sync_ptr + 1, 0)
        tl.atomic_xchg(sync_ptr + 2, want)
