"""Per-token gates of a chunk: log g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b), and the vectors the
chunk step derives from their in-chunk cumulative sum G."""
import triton
import triton.language as tl

from .shapes import NHV


@triton.jit
def _gates(a, b, alog, dtb):
    """log g = -exp(A_log) * softplus(a + dt_bias) and beta = sigmoid(b); elementwise, fp32."""
    x = a + dtb
    sp = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
    lg = -tl.exp(alog) * sp
    beta = 1.0 / (1.0 + tl.exp(-b))
    return lg, beta


@triton.jit
def _chunk_ab(a_ptr, b_ptr, tok, valid, h):
    """The gate inputs a and b of one chunk's tokens ([C], as stored; masked tokens read 0)."""
    a = tl.load(a_ptr + tok * NHV + h, mask=valid, other=0.0)
    b = tl.load(b_ptr + tok * NHV + h, mask=valid, other=0.0)
    return a, b


@triton.jit
def _gates_of(a, b, valid, alog, dtb):
    """Per-token log gate and beta of one chunk ([C]) from its a and b; masked tokens get 0 and 0."""
    lg, beta = _gates(a.to(tl.float32), b.to(tl.float32), alog, dtb)
    lg = tl.where(valid, lg, 0.0)
    beta = tl.where(valid, beta, 0.0)
    return lg, beta


@triton.jit
def _chunk_gates(a_ptr, b_ptr, tok, valid, h, alog, dtb):
    """Per-token log gate and beta of one chunk ([C]); masked tokens get 0 and 0."""
    a, b = _chunk_ab(a_ptr, b_ptr, tok, valid, h)
    return _gates_of(a, b, valid, alog, dtb)


@triton.jit
def _gate_vectors(G):
    """gamma = exp(G), the decay to the chunk end exp(G_C - G) and exp(G_C) of a chunk's cumulative log gates (G_C:
    G at the chunk end, its minimum: G is non-increasing and masked rows add 0)."""
    gC = tl.min(G, axis=0)
    return tl.exp(G), tl.exp(gC - G), tl.exp(gC)
