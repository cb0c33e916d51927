"""The chain launch of the BV = 64 wgmma row (N >= 16 from 3000 tokens, on sm_90) in Gluon, with the state slice held
transposed (Ht = S[v0:v0+64, :], [BV, K]) so that every state-dependent dot takes its left operand from registers:
KH^T = Ht K^T, QH^T = Ht Q^T, X^T = R^T Tm^T, O^T = gamma QH^T + X^T P^T and Ht <- exp(G_C) Ht + (X^T * decay) K, each
the previous dot's accumulator converted to fp16 in place. The chunk's tiles (k and q copies, Tm) and gate vectors
are copied with cp.async at the top of each step into the other of two shared buffers (chain_gl.py says why). P =
(Q K^T) o M is computed here, from the q and k tiles beside K H, instead of copied from the prep: the call then moves
a quarter less workspace through DRAM (the step waited on its tile copies) and the prep's P CTAs only copy q. The
value tile, whose rows are tokens in memory but columns in the accumulator, is copied with the other tiles (cp.async,
16 bytes a thread along the value columns) into a shared buffer and read back transposed by ldmatrix; the step's
output leaves through the same buffer (stmatrix, transposed, then 16-byte stores). Loaded into registers a step
ahead instead, the tile was copied between registers at the loop's end, which waited for its load there. BV = 64: a
warp group's wgmma has 64 rows. GPU only (Gluon has no interpreter)."""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

from .chain_gl import _cta, _gates, _issue, _state_in, _tile_buffers
from .shapes import DK, NHV


@gluon.jit
def _issue_v(v_s, b, c0, eos, h, v0, v_ptr, C: gl.constexpr, BV: gl.constexpr, OS: gl.constexpr):
    """cp.async of the chunk at c0's value tile [C, BV] (bf16, 16 B a thread) into buffer b of v_s, joining the
    next commit group; rows past eos are not read (they hold zeros)."""
    j = gl.arange(0, BV, layout=gl.SliceLayout(0, OS))
    t = gl.arange(0, C, layout=gl.SliceLayout(1, OS))
    tok = c0 + t
    vmask = (tok < eos)[:, None] & (j < BV)[None, :]
    cp.async_copy_global_to_shared(v_s.index(b), v_ptr + tok[:, None] * (NHV * DK) + h * DK + v0 + j[None, :],
                                   mask=vmask)


@gluon.jit
def _issue_gates(g_s, b, c0, bos, eos, n, h, wp_ptr, C: gl.constexpr):
    """cp.async of the chunk at c0's gate block into buffer b of g_s (its own commit group); nothing is read past
    the sequence's end."""
    LG: gl.constexpr = gl.BlockedLayout([2], [32], [4], [0])     # 4 C = 256 elements, each once
    x = gl.arange(0, 4 * C, layout=LG)
    m = c0 < eos
    cp.async_copy_global_to_shared(g_s.index(b), _gates(c0, bos, n, h, wp_ptr, C) + x, mask=m)
    cp.commit_group()


@gluon.jit
def _gdn_chain_glt(
    q_ptr, k_ptr, v_ptr, s_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, o_ptr, ns_ptr, ws_ptr,
    wp_ptr, perm_ptr, scale, N, NP2: gl.constexpr, LPT: gl.constexpr,
    ALGO: gl.constexpr, C: gl.constexpr, BV: gl.constexpr, SB: gl.constexpr, HAS_STATE: gl.constexpr,
    PREC_QK: gl.constexpr, PREC_F: gl.constexpr, INTERP: gl.constexpr, MMA_V3: gl.constexpr = False,
    PDL: gl.constexpr = False,
):
    """As chain_gl._gdn_chain_gl (same arguments and grid), for BV = 64."""
    gl.static_assert(LPT != 1, "the chain ranks no sequences here")
    gl.static_assert(C == 64, "C = 64")
    gl.static_assert(BV == 64, "one warp group's wgmma has 64 rows: BV = 64")
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    DOTA: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    VR: gl.constexpr = gl.SliceLayout(1, MMA)
    TC: gl.constexpr = gl.SliceLayout(0, MMA)
    OS: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])      # [C, BV] tiles, 16 B a thread
    vo = gl.arange(0, BV, layout=gl.SliceLayout(0, OS))
    to = gl.arange(0, C, layout=gl.SliceLayout(1, OS))

    n, h, hq, v0, bos, eos = _cta(cu_ptr, perm_ptr, BV, LPT, PDL)
    vx = gl.arange(0, BV, layout=VR)
    kx = gl.arange(0, DK, layout=TC)
    s_off = (n * NHV + h) * (DK * DK) + (v0 + vx[:, None]) * DK + kx[None, :]     # Ht[v, k] = S[v0 + v, k]
    Ht = _state_in(s_ptr + s_off, gl.zeros([BV, DK], gl.float32, MMA), HAS_STATE, PDL and (LPT != 2))

    k_s, q_s, t_s, p_s = _tile_buffers(C, 1)      # P is made and read within a step: one buffer
    g_s = gl.allocate_shared_memory(gl.float32, [2, 4 * C], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    bufs = (k_s, q_s, t_s, p_s)
    # the value tiles, copied with the other tiles; each step's buffer then takes its output on the way out
    v_s = gl.allocate_shared_memory(gl.bfloat16, [2, C, BV],
                                    gl.NVMMASharedLayout.get_default_for([C, BV], gl.bfloat16))
    _issue_gates(g_s, 0, bos, bos, eos, n, h, wp_ptr, C)
    _issue_v(v_s, 0, bos, eos, h, v0, v_ptr, C, BV, OS)
    _issue(bufs, 0, bos, bos, eos, n, h, hq, ws_ptr, wp_ptr, C, False)
    zero = gl.zeros([BV, C], gl.float32, MMA)
    rr = gl.arange(0, C, layout=VR)
    rr2 = gl.arange(0, C, layout=TC)
    nch = (eos - bos + C - 1) // C
    for i in range(0, nch):
        c0 = bos + i * C
        b = i % 2
        cp.wait_group(0)            # this chunk's tiles, value tile and gates, copied during the step before
        gl.thread_barrier()         # ... visible to every thread; the other buffers' last readers are done
        _issue_gates(g_s, 1 - b, c0 + C, bos, eos, n, h, wp_ptr, C)
        _issue_v(v_s, 1 - b, c0 + C, eos, h, v0, v_ptr, C, BV, OS)
        _issue(bufs, 1 - b, c0 + C, bos, eos, n, h, hq, ws_ptr, wp_ptr, C, False)
        egc = gl.load(_gates(c0, bos, n, h, wp_ptr, C) + C - 1)      # exp(G_C), needed at the state update
        gb = g_s.index(b)
        vb = v_s.index(b)
        kb = k_s.index(b)
        qk = warpgroup_mma(q_s.index(b), kb.permute((1, 0)), zero, is_async=True)        # Q K^T [C, C]
        ha = gl.convert_layout(Ht.to(gl.float16), DOTA)
        kh = warpgroup_mma(ha, kb.permute((1, 0)), zero, is_async=True)                  # KH^T [BV, C]
        qk = warpgroup_mma_wait(1, deps=[qk])
        # P = (Q K^T) o M, M[r, s] = exp(G_r - G_s) for s <= r, into this buffer's P tile (no copy of it is read)
        G2 = gb.slice(3 * C, C)     # G log2(e)
        dG = gl.where(rr[:, None] >= rr2[None, :], G2.load(VR)[:, None] - G2.load(TC)[None, :], float("-inf"))
        pm = qk * gl.exp2(dG)
        p_s.index(0).store(pm.to(gl.float16))
        fence_async_shared()        # the P tile's generic stores before the wgmma that reads it
        gl.thread_barrier()
        vm = vb.permute((1, 0)).load(MMA)
        kh, ha = warpgroup_mma_wait(0, deps=[kh, ha])
        gam = gb.slice(0, C).load(TC)
        Rt = gb.slice(C, C).load(TC)[None, :] * (vm.to(gl.float32) - gam[None, :] * kh)
        ra = gl.convert_layout(Rt.to(gl.float16), DOTA)
        x = warpgroup_mma(ra, t_s.index(b).permute((1, 0)), zero, is_async=True)         # X^T = R^T Tm^T
        # Q H^T off the serial path, its fp16 left operand made again (not kept live across R and X)
        qa = gl.convert_layout(Ht.to(gl.float16), DOTA)
        qh = warpgroup_mma(qa, q_s.index(b).permute((1, 0)), zero, is_async=True)        # QH^T
        x, ra = warpgroup_mma_wait(1, deps=[x, ra])
        xda = gl.convert_layout((x * gb.slice(2 * C, C).load(TC)[None, :]).to(gl.float16), DOTA)
        xa = gl.convert_layout(x.to(gl.float16), DOTA)
        Hn = warpgroup_mma(xda, kb, Ht * egc, is_async=True)                             # [BV, K]
        qh, qa = warpgroup_mma_wait(1, deps=[qh, qa])     # (the state update is the one still running)
        O = warpgroup_mma(xa, p_s.index(0).permute((1, 0)), qh * gb.slice(0, C).load(TC)[None, :], is_async=True)
        Ht, xda = warpgroup_mma_wait(1, deps=[Hn, xda])
        O, xa = warpgroup_mma_wait(0, deps=[O, xa])
        gl.thread_barrier()         # every thread has read its part of the value tile
        vb.permute((1, 0)).store((O * scale).to(gl.bfloat16))
        gl.thread_barrier()         # ... and O is in vb, read back 16 B a thread for the store
        tok = c0 + to
        o_off = tok[:, None] * (NHV * DK) + h * DK + v0 + vo[None, :]
        gl.store(o_ptr + o_off, vb.load(OS), mask=(tok < eos)[:, None] & (vo < BV)[None, :])
    cp.wait_group(0)
    gl.store(ns_ptr + s_off, Ht)
