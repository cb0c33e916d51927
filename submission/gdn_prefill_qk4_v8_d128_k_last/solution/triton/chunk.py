"""The chunk step's math: tl.dot at a chosen operand precision (_mm), Tm = (I + A)^-1 and P = (Q K^T) o M of a chunk,
and the state update with the chunk's output tile given Tm and P (_chunk_apply, and its transposed form)."""
import triton
import triton.language as tl

# dot operand precision codes (constexpr); PREC, where a function takes it, is the pair (PREC_QK, PREC_F): K K^T and
# Q K^T (bf16, the inputs' own precision, on the GPU), and every other dot (fp16 on the GPU); both exact fp32 in the
# interpreter
P_BF16 = 0
P_IEEE = 2      # exact fp32 (interpreter)
P_TF32X3 = 3    # the segment launches' compositions of segment maps
P_FP16 = 6      # both operands fp16 (11-bit significand, range +-65504)


@triton.jit
def _mm(a, b, PREC: tl.constexpr):
    """a @ b with fp32 accumulation; PREC picks the operand precision."""
    if PREC == 0:
        out = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), out_dtype=tl.float32)
    elif PREC == 3:
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="tf32x3")
    elif PREC == 6:
        out = tl.dot(a.to(tl.float16), b.to(tl.float16), out_dtype=tl.float32)
    else:
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return out


@triton.jit
def _chunk_tm(k, G, beta, C: tl.constexpr, SB: tl.constexpr, PREC_QK: tl.constexpr, PREC_F: tl.constexpr):
    """Tm = (I + A)^-1, A[r,s] = beta_r exp(G_r - G_s) (k_r . k_s) for s < r (fp32 [C, C])."""
    NB: tl.constexpr = C // SB
    tl.static_assert(NB <= 16, "at most 16 diagonal blocks: 4 doubling merges")
    r = tl.arange(0, C)
    lower = r[:, None] > r[None, :]
    kk = _mm(k, tl.trans(k), PREC_QK)
    dG = tl.where(lower, G[:, None] - G[None, :], 0.0)
    A = tl.where(lower, beta[:, None] * tl.exp(dG) * kk, 0.0)

    # Diagonal SB x SB blocks, all NB at once, by right-looking elimination on [I + Dg | I]:
    # at step j row j of each block of Ti is final and is subtracted, scaled by column j of
    # the block of A, from the rows below it (A is strictly lower: rows <= j are untouched).
    # The blocks are gathered into [NB, SB, SB]: both extractions reduce along the axis they are
    # broadcast back on, so the loop has no layout shuffles.
    A4 = tl.reshape(A, (NB, SB, NB, SB))
    bi = tl.arange(0, NB)[:, None, None, None]
    bj = tl.arange(0, NB)[None, None, :, None]
    Dg = tl.sum(tl.where(bi == bj, A4, 0.0), axis=2)             # [NB, SB, SB]
    ii = tl.arange(0, SB)[None, :, None]
    jj = tl.arange(0, SB)[None, None, :]
    Ti = tl.where(ii == jj, 1.0, 0.0) + tl.zeros((NB, SB, SB), dtype=tl.float32)
    for j in tl.static_range(0, SB - 1):
        col = tl.sum(tl.where(jj == j, Dg, 0.0), axis=2)         # Dg[:, :, j]  [NB, SB]
        row = tl.sum(tl.where(ii == j, Ti, 0.0), axis=1)         # Ti[:, j, :]  [NB, SB]
        Ti = Ti - col[:, :, None] * row[:, None, :]
    Tm = tl.reshape(tl.where(bi == bj, Ti[:, :, None, :], 0.0), (C, C))

    # doubling merges, while the merged blocks are smaller than the chunk: with D_s = blockdiag of s-blocks and
    # E_s the A-entries of the lower-left s-block inside each 2s-block, (D_s + E_s)^-1 = Tm_s - Tm_s E_s Tm_s.
    for lvl in tl.static_range(4):
        if SB * (1 << lvl) < C:
            s = SB * (1 << lvl)
            sel = ((r[:, None] // s) == (r[None, :] // s) + 1) & (((r[None, :] // s) % 2) == 0)
            E = tl.where(sel, A, 0.0)
            Tm = Tm - _mm(Tm, _mm(E, Tm, PREC_F), PREC_F)
    return Tm


@triton.jit
def _chunk_p(q, k, G, C: tl.constexpr, PREC_QK: tl.constexpr):
    """P = (Q K^T) o M, M[r,s] = exp(G_r - G_s) for s <= r, else 0 (fp32 [C, C])."""
    r = tl.arange(0, C)
    causal = r[:, None] >= r[None, :]
    P = tl.where(causal, tl.exp(tl.where(causal, G[:, None] - G[None, :], 0.0)), 0.0)
    return P * _mm(q, tl.trans(k), PREC_QK)


@triton.jit
def _chunk_apply(H, Tm, P, qkv, gv, scale, PREC, OUT: tl.constexpr):
    """Given Tm and P of the chunk, its q, k, v ([C, K], [C, K], [C, BV]) and its gate vectors gv = (gamma, beta,
    decay to the chunk end, exp(G_C)) (_gate_vectors): output tile O [C, BV] (0 unless OUT) and the state after the
    chunk. Its dots take PREC[1]."""
    q, k, v = qkv
    gam, beta, dec, egC = gv
    KH = _mm(k, H, PREC[1])                                          # [C, BV]
    O = 0.0
    if OUT:
        QH = _mm(q, H, PREC[1])                                      # output only
    R = beta[:, None] * (v - gam[:, None] * KH)
    X = _mm(Tm, R, PREC[1])                                          # new values, [C, BV]
    if OUT:
        O = scale * (gam[:, None] * QH + _mm(P, X, PREC[1]))
    Xd = X * dec[:, None]                                            # decay to the chunk end
    H = egC * H + _mm(tl.trans(k), Xd, PREC[1])
    return O, H


@triton.jit
def _chunk_apply_t(Ht, Tm, P, qkv, gv, scale, PREC, OUT: tl.constexpr):
    """_chunk_apply transposed (ALGO_CHUNK_WS_T): the state slice as Ht = S[v0:v0+BV, :] ([BV, K])
    and the value-side tiles as [BV, C] (v too), so every tensor-core result feeds the next dot as its
    left operand. Offline (ptxas sm_90) its chain loop has 9-30 % fewer instructions per step and
    fewer spills than ALGO_CHUNK_WS at the same BV (H200 timings: docs/kernels/prefill.md)."""
    q, k, vt = qkv
    gam, beta, dec, egC = gv
    KHt = _mm(Ht, tl.trans(k), PREC[1])                              # [BV, C]
    Ot = 0.0
    if OUT:
        QHt = _mm(Ht, tl.trans(q), PREC[1])                          # output only
    Rt = beta[None, :] * (vt - gam[None, :] * KHt)
    Xt = _mm(Rt, tl.trans(Tm), PREC[1])                              # new values, [BV, C]
    if OUT:
        Ot = scale * (gam[None, :] * QHt + _mm(Xt, tl.trans(P), PREC[1]))
    Xdt = Xt * dec[None, :]                                          # decay to the chunk end
    Ht = egC * Ht + _mm(Xdt, k, PREC[1])
    return Ot, Ht
