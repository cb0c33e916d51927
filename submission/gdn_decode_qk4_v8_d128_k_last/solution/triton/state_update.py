"""The decode step as one streaming pass over the state: gates, delta-rule update and output, fused."""
import triton
import triton.language as tl


@triton.jit
def _gdn_decode_kernel(
    q_ptr, k_ptr, v_ptr, s_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, o_ptr, ns_ptr,
    scale,
    NUM_HV: tl.constexpr, GROUP: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BV: tl.constexpr, HAS_STATE: tl.constexpr, LOAD_EVICT: tl.constexpr, VB_FAST: tl.constexpr,
):
    """One CTA per (batch b, v-head h, block of BV value rows)."""
    if VB_FAST:  # grid (V blocks, B * HV): the V blocks of one head are launched together
        pid_v = tl.program_id(0)
        pid_bh = tl.program_id(1)
    else:        # grid (B * HV, V blocks)
        pid_bh = tl.program_id(0)        # b * HV + h  (v, a, b, output are [B, HV, ...])
        pid_v = tl.program_id(1)         # block of BV value rows
    i_b = pid_bh // NUM_HV
    i_h = pid_bh % NUM_HV
    NUM_HK: tl.constexpr = NUM_HV // GROUP
    qk_row = i_b * NUM_HK + i_h // GROUP

    offs_k = tl.arange(0, K)
    q = tl.load(q_ptr + qk_row * K + offs_k).to(tl.float32)
    k = tl.load(k_ptr + qk_row * K + offs_k).to(tl.float32)

    # Gates (scalar per program; recomputing them per CTA is cheaper than another launch).
    A_log = tl.load(A_log_ptr + i_h).to(tl.float32)
    dt_bias = tl.load(dt_bias_ptr + i_h).to(tl.float32)
    a_val = tl.load(a_ptr + pid_bh).to(tl.float32)
    b_val = tl.load(b_ptr + pid_bh).to(tl.float32)
    x = a_val + dt_bias
    # softplus, overflow-free: max(x, 0) + log(1 + exp(-|x|)); torch switches to x above 20,
    # where the two agree to fp32 precision.
    softplus = tl.maximum(x, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(x)))
    g = tl.exp(-tl.exp(A_log) * softplus)
    beta = 1.0 / (1.0 + tl.exp(-b_val))
    kq = tl.sum(k * q, axis=0)

    rows = pid_v * BV + tl.arange(0, BV)
    # The tile's base as one scalar (int32: fine up to B * HV * V * K < 2^31, i.e. B < 16384), offsets within it:
    # loads and stores share one base register with immediate offsets, and ptxas issues all the state loads up
    # front (per-row offsets gave each access its own 64-bit address and left the last loads late at BV = 8).
    tile = (pid_bh * V + pid_v * BV) * K
    s_ptr = s_ptr + tile
    ns_ptr = ns_ptr + tile
    offs = tl.arange(0, BV)[:, None] * K + offs_k[None, :]
    if HAS_STATE:
        S = tl.load(s_ptr + offs, eviction_policy=LOAD_EVICT)
        Sk = tl.sum(S * k[None, :], axis=1)
        Sq = tl.sum(S * q[None, :], axis=1)
    else:
        S = tl.zeros([BV, K], dtype=tl.float32)
        Sk = tl.zeros([BV], dtype=tl.float32)
        Sq = tl.zeros([BV], dtype=tl.float32)
    vv = tl.load(v_ptr + pid_bh * V + rows).to(tl.float32)
    v_new = beta * (vv - g * Sk)
    o = scale * (g * Sq + v_new * kq)
    tl.store(o_ptr + pid_bh * V + rows, o.to(o_ptr.dtype.element_ty))
    S_new = g * S + v_new[:, None] * k[None, :]
    tl.store(ns_ptr + offs, S_new)
