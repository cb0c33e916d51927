"""The prep: Tm and P of every (chunk, head), all chunks in parallel, into the workspaces (workspace.py) that the
chain then reads; the first launch of the two-launch and segment rows, and the prep role of the fused launch."""
import triton
import triton.language as tl

from .chunk import _chunk_p, _chunk_tm
from .gates import _chunk_gates, _gate_vectors
from .pdl import gdc_launch_dependents
from .shapes import DK, NHK, NHV
from .workspace import _g_off, _kq_off, _wp_off, _ws_off


@triton.jit
def _rank_sequence(p, cu_ptr, perm_ptr, N, NP2: tl.constexpr):
    """Two launches with sequences longest first (launch_table.LPT_MIN_N, cfg lpt): sequence p's rank r in
    chain._longest_first's order, stored as row r of perm (n, bos, eos, 0), so each chain CTA reads its sequence and
    bounds in one round trip instead of ranking all N sequences itself."""
    i = tl.arange(0, NP2)
    m = i < N
    ln = tl.where(m, tl.load(cu_ptr + i + 1, mask=m, other=0) - tl.load(cu_ptr + i, mask=m, other=0), -1)
    bos = tl.load(cu_ptr + p)
    eos = tl.load(cu_ptr + p + 1)
    mine = eos - bos
    rank = tl.sum(((ln > mine) | ((ln == mine) & (i < p))).to(tl.int32), axis=0)
    tl.store(perm_ptr + rank * 4, p)
    tl.store(perm_ptr + rank * 4 + 1, bos.to(tl.int32))
    tl.store(perm_ptr + rank * 4 + 2, eos.to(tl.int32))


@triton.jit
def _store_copy(wp_ptr, slot, h, x, C: tl.constexpr, Q: tl.constexpr):
    """The fp16 copy of a chunk's k (or, Q, q) rows into the P workspace: one per q/k head, by its first head h."""
    if h % (NHV // NHK) == 0:
        tl.store(wp_ptr + _kq_off(slot, h // (NHV // NHK), C) + (C * DK if Q else 0), x.to(tl.float16))


@triton.jit
def _store_gate_vectors(gp, G, beta, C: tl.constexpr):
    """gamma, beta and the decay vector of a chunk into its gate block gp (G log2(e) is its fourth row)."""
    r = tl.arange(0, C)
    gam, dec, _ = _gate_vectors(G)   # egC: the chain takes it from gamma's last row
    tl.store(gp + r, gam)
    tl.store(gp + C + r, beta)
    tl.store(gp + 2 * C + r, dec)


@triton.jit
def _prep_slot(slot, h, io, hp, cu_ptr, N, DO_TM: tl.constexpr, C: tl.constexpr, SB: tl.constexpr,
               NP2: tl.constexpr, PREC, WS_P: tl.constexpr = True, STORE_FIRST: tl.constexpr = True):
    """Tm (DO_TM) or else P of workspace slot `slot`, head h, with the fp16 copy of the chunk's k and its gate block
    (with Tm) or of its q (with P; the P tile only WS_P). io = (q_ptr, k_ptr, a_ptr, b_ptr, ws_ptr, wp_ptr),
    hp = (alog_ptr, dtb_ptr), PREC = (PREC_QK, PREC_F). STORE_FIRST: the copies and the gate vectors are stored
    before the solve (Tm or P), so none of them is live through it: the prep launch then fits 4 CTAs an SM on sm_90
    instead of 3 (116-126 registers against 159-168); the fused launch, whose CTAs an SM its shared memory sets,
    stores them after it (stored first, its calls took 3 % longer; docs/kernels/prefill.md, `early`)."""
    q_ptr, k_ptr, a_ptr, b_ptr, ws_ptr, wp_ptr = io
    alog_ptr, dtb_ptr = hp
    hq = h // (NHV // NHK)
    m = tl.arange(0, NP2)
    cu_m = tl.load(cu_ptr + m, mask=m < N, other=0).to(tl.int32)
    first = cu_m // C + m
    n = tl.sum(((first <= slot) & (m < N)).to(tl.int32), axis=0) - 1
    bos = tl.load(cu_ptr + n).to(tl.int32)
    eos = tl.load(cu_ptr + n + 1).to(tl.int32)
    c0 = bos + (slot - (bos // C + n)) * C
    if c0 < eos:
        alog = tl.load(alog_ptr + h).to(tl.float32)
        dtb = tl.load(dtb_ptr + h).to(tl.float32)
        r = tl.arange(0, C)
        kx = tl.arange(0, DK)
        tok = c0 + r
        valid = tok < eos
        qk_off = tok[:, None] * (NHK * DK) + hq * DK + kx[None, :]
        if DO_TM:
            k = tl.load(k_ptr + qk_off, mask=valid[:, None], other=0.0)
            if STORE_FIRST:
                _store_copy(wp_ptr, slot, h, k, C, False)
            lg, beta = _chunk_gates(a_ptr, b_ptr, tok, valid, h, alog, dtb)
            G = tl.cumsum(lg, axis=0)
            gp = wp_ptr.to(tl.pointer_type(tl.float32)) + _g_off(slot, h, C)
            tl.store(gp + 3 * C + r, G * 1.4426950408889634)    # G log2(e), for the chain's exp2
            if STORE_FIRST:
                _store_gate_vectors(gp, G, beta, C)
            Tm = _chunk_tm(k, G, beta, C, SB, PREC[0], PREC[1])
            tl.store(ws_ptr + _ws_off(slot, h, C), Tm.to(ws_ptr.dtype.element_ty))
            if not STORE_FIRST:
                _store_copy(wp_ptr, slot, h, k, C, False)
                _store_gate_vectors(gp, G, beta, C)
        elif WS_P:
            k = tl.load(k_ptr + qk_off, mask=valid[:, None], other=0.0)
            lg, beta = _chunk_gates(a_ptr, b_ptr, tok, valid, h, alog, dtb)
            q = tl.load(q_ptr + qk_off, mask=valid[:, None], other=0.0)
            if STORE_FIRST:
                _store_copy(wp_ptr, slot, h, q, C, True)
            P = _chunk_p(q, k, tl.cumsum(lg, axis=0), C, PREC[0])
            tl.store(wp_ptr + _wp_off(slot, h, C), P.to(wp_ptr.dtype.element_ty))
            if not STORE_FIRST:
                _store_copy(wp_ptr, slot, h, q, C, True)
        elif h % (NHV // NHK) == 0:     # no P tiles (the chain computes them): the q copy only
            q = tl.load(q_ptr + qk_off, mask=valid[:, None], other=0.0)
            tl.store(wp_ptr + _kq_off(slot, hq, C) + C * DK, q.to(tl.float16))


@triton.jit
def _gdn_prep_kernel(
    q_ptr, k_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, ws_ptr, wp_ptr, perm_ptr, N,
    C: tl.constexpr, SB: tl.constexpr, NP2: tl.constexpr, PREC_QK: tl.constexpr, PREC_F: tl.constexpr,
    MMA_V3: tl.constexpr = False, RANK: tl.constexpr = False, PDL: tl.constexpr = False, WS_P: tl.constexpr = True,
):
    """The prep launch: Tm and P of every (chunk, head), grid (slots, HV, 2): Tm and P in separate CTAs, each path
    with fewer live registers than one CTA computing both. MMA_V3 (cfg "prep_mma_v3") is not read: it only keys
    Triton's in-process kernel cache, which ignores the env knobs that pick the lowering (lowering.launch_env).
    RANK (two launches, longest first): the CTAs (p < N, 0, 0) also write sequence p's row of the longest-first table
    (_rank_sequence) that the chain launch reads. PDL: the next launch may start once every CTA has stored its slot
    (pdl.py). WS_P False (the BV = 64 Gluon chain, which computes P itself): the P CTAs only copy q."""
    io = (q_ptr, k_ptr, a_ptr, b_ptr, ws_ptr, wp_ptr)
    if RANK:
        if (tl.program_id(0) < N) & (tl.program_id(1) == 0) & (tl.program_id(2) == 0):
            _rank_sequence(tl.program_id(0), cu_ptr, perm_ptr, N, NP2)
    if tl.program_id(2) == 0:
        _prep_slot(tl.program_id(0), tl.program_id(1), io, (alog_ptr, dtb_ptr), cu_ptr, N, True, C, SB, NP2,
                   (PREC_QK, PREC_F), WS_P)
    else:
        _prep_slot(tl.program_id(0), tl.program_id(1), io, (alog_ptr, dtb_ptr), cu_ptr, N, False, C, SB, NP2,
                   (PREC_QK, PREC_F), WS_P)
    if PDL:
        gdc_launch_dependents()
