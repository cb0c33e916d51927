"""Layout of the workspaces that the prep writes and the chain reads (the rows with a workspace), and the fused
launch's wait on the prep role's flags.

Chunk j of sequence n (tokens from bos) lives in slot bos // C + n + j; the slots of distinct chunks are distinct
and all below T // C + N + 1 (floor(b/C) + ceil(L/C) <= floor((b+L)/C) + 1). Per slot:
    Tm workspace (fp16)  the Tm tiles of the NHV heads
    P workspace (fp16)   the P tiles of the NHV heads, then fp16 copies of the chunk's k and q of the NHK q/k heads,
                         then per v-head the fp32 gate vectors gamma, beta, the decay to the chunk end and the
                         cumulative log gate G times log2(e)."""
import triton
import triton.language as tl

from .shapes import DK, NHK, NHV


@triton.jit
def _slot(c0, bos, n, C: tl.constexpr):
    """The workspace slot of the chunk at c0 of sequence n, which starts at bos."""
    return bos // C + n + (c0 - bos) // C


@triton.jit
def _ws_off(slot, h, C: tl.constexpr):
    """Offsets of the Tm tile of workspace slot `slot`, head h."""
    r = tl.arange(0, C)
    return (slot * NHV + h) * (C * C) + r[:, None] * C + r[None, :]


@triton.jit
def _p16_slot(C: tl.constexpr):
    """fp16 elements per slot of the P workspace (P tiles, k and q copies, gate blocks)."""
    return NHV * C * C + 2 * NHK * C * DK + 8 * NHV * C


@triton.jit
def _wp_off(slot, h, C: tl.constexpr):
    """Offsets of the P tile of workspace slot `slot`, head h."""
    r = tl.arange(0, C)
    tile = r[:, None] * C + r[None, :]
    return slot * _p16_slot(C) + h * (C * C) + tile


@triton.jit
def _g_off(slot, h, C: tl.constexpr):
    """fp32-element offset of the gate block of workspace slot `slot`, head h, after the k and q copies in the P
    workspace: gamma, beta and the decay to the chunk end (_gate_vectors), then G log2(e), of the chunk's C rows."""
    return (slot * _p16_slot(C) + NHV * C * C + 2 * NHK * C * DK) // 2 + h * (4 * C)


@triton.jit
def _kq_off(slot, hq, C: tl.constexpr):
    """Offsets of the fp16 copy of k of workspace slot `slot`, q/k head hq, in the P workspace (q's copy follows at
    + C * DK); rows past the sequence's end hold 0, as the masked loads give."""
    r = tl.arange(0, C)
    kx = tl.arange(0, DK)
    return slot * _p16_slot(C) + NHV * C * C + hq * (2 * C * DK) + r[:, None] * DK + kx[None, :]


@triton.jit
def _wait_chunks(sync_ptr, first, nch, h, want):
    """Fused launch: spin until the prep role has published chunks [first, first + nch) of head h
    (their flags hold `want`). The acquiring atomics order this CTA's later workspace loads after
    the prep CTAs' stores; the loop's loads come after the wait in program order."""
    WB: tl.constexpr = 64
    j0 = 0
    while j0 < nch:
        jj = j0 + tl.arange(0, WB)
        mk = jj < nch
        ptrs = sync_ptr + 3 + (first + jj) * NHV + h
        miss = 1
        while miss > 0:
            f = tl.atomic_add(ptrs, tl.zeros((WB,), dtype=tl.int32), mask=mk, sem="acquire")
            miss = tl.sum(((f != want) & mk).to(tl.int32), axis=0)
        j0 += WB


def p16_slot_numel(C):
    """_p16_slot on the host (the P workspace's size)."""
    return int(_p16_slot.fn(C))
