"""The recurrent ablation (`kernel_recurrent`): token by token, the state slice in registers, no tensor cores."""
import triton
import triton.language as tl

from .gates import _gates
from .shapes import DK, NHK, NHV


@triton.jit
def _recurrent_chunk(H, c0, cta, io, par, C: tl.constexpr, BV: tl.constexpr, INTERP: tl.constexpr):
    """Token-by-token recurrence over the chunk at c0 (cta, io, par: as in chain._step)."""
    eos = cta[2]
    t_end = tl.minimum(c0 + C, eos)
    if INTERP:
        t = c0
        while t < t_end:
            H = _recurrent_token(H, t, cta, io, par, BV)
            t += 1
    else:
        for t in range(c0, t_end):
            H = _recurrent_token(H, t, cta, io, par, BV)
    return H


@triton.jit
def _recurrent_token(H, t, cta, io, par, BV: tl.constexpr):
    """S <- g S; v_new = beta (v - S k); S <- S + v_new k^T; o = scale S q (H = S^T)."""
    n, bos, eos, h, hq, v0, vcols = cta
    q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, o_ptr, ws_ptr, wp_ptr = io
    alog, dtb, scale = par
    kx = tl.arange(0, DK)
    vx = tl.arange(0, BV)
    kt = tl.load(k_ptr + t * (NHK * DK) + hq * DK + kx).to(tl.float32)
    qt = tl.load(q_ptr + t * (NHK * DK) + hq * DK + kx).to(tl.float32)
    vt = tl.load(v_ptr + t * (NHV * DK) + h * DK + v0 + vx).to(tl.float32)
    at = tl.load(a_ptr + t * NHV + h).to(tl.float32)
    bt = tl.load(b_ptr + t * NHV + h).to(tl.float32)
    lg, beta = _gates(at, bt, alog, dtb)
    H = H * tl.exp(lg)
    kv = tl.sum(H * kt[:, None], axis=0)                          # [BV]
    vn = beta * (vt - kv)
    H = H + kt[:, None] * vn[None, :]
    o = scale * tl.sum(H * qt[:, None], axis=0)
    tl.store(o_ptr + t * (NHV * DK) + h * DK + v0 + vx, o.to(o_ptr.dtype.element_ty))
    return H
