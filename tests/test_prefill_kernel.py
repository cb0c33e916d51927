"""GDN prefill kernels (submission/gdn_prefill_qk4_v8_d128_k_last) against the float64 reference.

Runs on the CPU under Triton's interpreter when no GPU is present (TRITON_INTERPRET=1 must be set
before triton is imported). There every tl.dot runs on exact fp32 operands, so besides the official
rule (an element fails only if abs > 1e-2 AND rel > 1e-2) the checks here are tight: the output may
differ from the float64 reference by one bf16 ulp only, the state by fp32 round-off only.
On a GPU the same tests run with the production operand precisions and the official rule, plus a
looser state bound.
"""
import math
import os
import types
from dataclasses import replace

import pytest
import torch
import triton
import triton.compiler.compiler

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from reference.gdn_recurrent import recurrent_packed  # noqa: E402
from tests.solutions import load_solution  # noqa: E402

DEFINITION = "gdn_prefill_qk4_v8_d128_k_last"
pk = load_solution(DEFINITION)                      # the entry points and the launcher
lt = load_solution(DEFINITION, "launch_table")      # the launch configs and the table
p16_slot_numel = load_solution(DEFINITION, "workspace").p16_slot_numel   # the P workspace's slot size
D = load_solution(DEFINITION, "shapes").D
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ON_GPU = DEVICE == "cuda"
WS_DEVICE = torch.empty(0, device=DEVICE).device     # the launcher keys its workspaces by the inputs' device (cuda:0)


def workspace(name):
    """The launcher's workspace `name` (kernel._workspace) on the tests' device."""
    return next(buf for (key, dev, _), buf in pk._WORKSPACES.items() if key == name and dev == str(WS_DEVICE))


def make_inputs(cu, seed=0, state_std=1.0):
    """Stand-in style inputs (GDN.md): unit-norm q/k per head, N(0,1) v/a/b, A_log = log U(1,16),
    dt_bias = inverse softplus of log-uniform dt in [1e-3, 1e-1], state N(0, state_std^2)."""
    g = torch.Generator().manual_seed(seed)
    T, N = cu[-1], len(cu) - 1
    q = torch.nn.functional.normalize(torch.randn(T, 4, 128, generator=g), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(T, 4, 128, generator=g), dim=-1).bfloat16()
    v = torch.randn(T, 8, 128, generator=g).bfloat16()
    a = torch.randn(T, 8, generator=g).bfloat16()
    b = torch.randn(T, 8, generator=g).bfloat16()
    A_log = torch.log(torch.empty(8).uniform_(1.0, 16.0, generator=g))
    dt = torch.exp(torch.empty(8).uniform_(math.log(1e-3), math.log(1e-1), generator=g))
    dt_bias = dt + torch.log(-torch.expm1(-dt))          # softplus(dt_bias) == dt
    state = state_std * torch.randn(N, 8, 128, 128, generator=g)
    cu_t = torch.tensor(cu, dtype=torch.int64)
    return [x.to(DEVICE) for x in (q, k, v, state, A_log, a, dt_bias, b, cu_t)]


def with_cfg(cfg):
    """An entry point that runs the chunked kernel with launch config `cfg` (returns None, like `kernel`)."""
    def fn(*args):
        pk._launch(pk.ALGO_CHUNK, *args, cfg=cfg)
    fn.cfg = cfg
    return fn


def _f16(fn, T, N):
    """Whether the entry point runs a row with a workspace (fp16 Tm and P) for T tokens in N sequences."""
    cfg = getattr(fn, "cfg", None) or (lt.pick(T, N) if fn is pk.kernel else None)
    return bool(cfg and cfg.ws)


def run_and_check(fn, cu, scale=0.0, seed=0, state_std=1.0, out_atol=1e-4):
    inputs = make_inputs(cu, seed, state_std)
    before = [x.clone() for x in inputs]
    env_before = {key: os.environ.get(key) for key in ("DISABLE_MMA_V3", "DISABLE_MMA_V5")}
    T, N = cu[-1], len(cu) - 1
    out = torch.full((T, 8, 128), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    new_state = torch.full((N, 8, 128, 128), float("nan"), dtype=torch.float32, device=DEVICE)
    ret = fn(*inputs[:9], scale, out, new_state)
    assert ret is None
    if ON_GPU:
        torch.cuda.synchronize()
    for x, y in zip(inputs, before):                      # inputs never written
        assert torch.equal(x, y)
    assert {key: os.environ.get(key) for key in env_before} == env_before   # compile knobs restored
    assert torch.isfinite(out.float()).all(), "output not fully written"
    assert torch.isfinite(new_state).all(), "new_state not fully written"

    ref_out, ref_state = recurrent_packed(*[x.cpu() for x in inputs], scale)
    o = out.cpu().double()
    err = (o - ref_out).abs()
    rel = err / (ref_out.abs() + 1e-8)
    fails = int(((err > 1e-2) & (rel > 1e-2)).sum())
    assert fails == 0, f"{fails} output elements fail the official rule (max abs {err.max():.3g})"
    serr = (new_state.cpu().double() - ref_state).abs().max().item()
    if ON_GPU:
        assert serr < 1e-2, f"new_state max abs err {serr:.3g}"
    else:   # exact-fp32 dots: bf16 rounding of the output and fp32 round-off of the state only
        # (one bf16 ulp: the interpreter's fp32 -> bf16 cast truncates instead of rounding); with a workspace Tm and
        # P are also stored in fp16 (2^-11 relative each), which moves the state by up to a few 1e-4 here
        bound = 2.0 ** -7 * ref_out.abs() + out_atol
        assert bool((err <= bound).all()), f"output off by more than bf16 rounding: {err.max():.3g}"
        sbound = 1e-3 if _f16(fn, T, N) else 1e-4
        assert serr < sbound, f"new_state max abs err {serr:.3g}"
    return err.max().item(), serr


# sequences shorter than a chunk (T <= 16: the C = 16 row), spanning chunk boundaries, a length-1 sequence, and
# a sequence of several chunks (the state is carried across chunks inside a CTA)
SMALL_CASES = [[0, 5], [0, 0, 9, 16], [0, 3, 20], [0, 17, 18, 40, 70]]


@pytest.mark.parametrize("cu", SMALL_CASES, ids=lambda c: "cu" + "-".join(map(str, c)))
def test_chunked_kernel(cu):
    run_and_check(pk.kernel, cu)


def test_chunked_kernel_multichunk_scale():
    # 9 chunks of 16 in the last sequence; scale = 1 makes outputs ~11x larger than the default. The one-launch
    # row (pinned: the table's row for this call could change): under the interpreter its dots are exact, so
    # the tight bound of run_and_check holds, while the workspace rows keep P in bf16 (a truncating cast there:
    # 0.024 off at this scale). On the GPU every row rounds P to fp16 in its P X dot. At BV = 64: the scale and
    # the chunk walk do not depend on the value slice, and 2 V slices a head are 8x fewer CTAs than the row's 16
    # (the row's own BV = 8 is run on sequences of up to 2 chunks by test_chunked_kernel)
    run_and_check(with_cfg(replace(lt.ONE_LAUNCH, BV=64)), [0, 9, 137], scale=1.0, seed=1)


@pytest.mark.parametrize("C", [16, 32])
def test_chunked_small_chunks(C):
    # more chunk boundaries per sequence; C = 32 has one doubling merge, C = 16 none
    run_and_check(with_cfg(lt.LaunchConfig(C=C, BV=64, SB=16)), [0, 17, 18, 40, 90], scale=None, seed=2)


def test_kernel_fused_path_and_its_workspace_is_reused_and_stale_content_is_harmless():
    # two sequences from 181 to 1400 tokens: the launch table takes the fused launch (Tm and P of every
    # (chunk, head) and the chains, as roles of one launch); P is kept in fp16 there, which costs output
    # precision (~2^-11 of the terms), not state precision
    assert lt.pick(260, 2).fused
    run_and_check(pk.kernel, [0, 100, 260], seed=6, out_atol=2e-3)
    # the workspace is kept between calls; a second call with other sequences reads only what it wrote
    bufs = {key: buf.data_ptr() for key, buf in pk._WORKSPACES.items()}
    run_and_check(pk.kernel, [0, 3, 257], seed=9, out_atol=2e-3)
    assert bufs and {key: buf.data_ptr() for key, buf in pk._WORKSPACES.items()} == bufs


def test_two_launch_wide_variant():
    # the N >= 16 entry of the table (transposed chain, BV = 32), on a small case
    run_and_check(with_cfg(lt.TWO_LAUNCH_WIDE), [0, 1, 33, 70, 100], seed=3, out_atol=2e-3)


def test_sequences_launched_longest_first_with_ties_and_padding():
    # CTAs take sequences by length rank (longest first); N = 5 pads the rank vector to 8 and three
    # sequences tie at 10 tokens: every sequence must still be computed exactly once (a rank that no sequence or
    # two sequences take leaves a sequence's outputs and new_state unwritten). The ranking does not depend on the
    # value slice, so the rows run here at BV = 64 (2 V slices a head: 8x fewer CTAs than the one-launch row's
    # BV = 8 under the interpreter); the one-launch row ranks in each chain CTA, the two-launch row in its prep
    for cfg in (lt.ONE_LAUNCH, lt.TWO_LAUNCH):
        run_and_check(with_cfg(replace(cfg, BV=64, lpt=True)),
                      [0, 10, 20, 25, 35, 36], seed=4, out_atol=2e-3)
    # the launch path turns the order on from LPT_MIN_N sequences (here 9, lengths 1..13 and ties; the rank vector
    # padded to 16) for the table's row (its lpt unset), run at BV = 64 as above
    cu = [0, 1, 4, 17, 18, 30, 31, 44, 50, 60]
    row = lt.pick(cu[-1], len(cu) - 1)
    assert lt.LPT_MIN_N <= 9 and row is lt.ONE_LAUNCH and row.lpt is None
    run_and_check(with_cfg(replace(row, BV=64)), cu, seed=5)


@pytest.mark.parametrize("row", ["ONE_LAUNCH", "TWO_LAUNCH"])
def test_next_chunk_loads_at_sequence_edges(row):
    # every chunked launch loads the next chunk's v, a, b a step early: the last step's loads are past the
    # sequence's end (masked), the empty sequence has no step, and a partial last chunk must take its own rows only;
    # the one-launch rows' 16-token chunks meet the same edges in fewer tokens, here at BV = 64 (the loads' masks
    # are on rows, not value columns; 2 V slices a head instead of the row's 16, which the interpreter runs one
    # after another; the row's own BV = 8 meets these edges in test_chunked_kernel). The other launches run this
    # very call (cu and seed 3) in tests of their own: TWO_LAUNCH_WIDE in test_prep_writes_every_slot, FUSED in
    # test_fused_prep_tickets_and_their_flag_planes (both with their workspaces poisoned first)
    cu = [0, 0, 17, 18, 40, 73] if row == "ONE_LAUNCH" else [0, 0, 17, 18, 150, 300]
    cfg = replace(lt.ONE_LAUNCH, BV=64) if row == "ONE_LAUNCH" else getattr(lt, row)
    run_and_check(with_cfg(cfg), cu, seed=3, out_atol=2e-3)


def _check_rows(cu, inputs, fn):
    """fn (an entry point) on `inputs` against the float64 reference over the sequences' rows [cu[0], cu[-1]) and
    the new state: the official rule on the finite elements, and NaN exactly where the reference has NaN."""
    T, N = inputs[0].shape[0], len(cu) - 1
    out = torch.zeros((T, 8, 128), dtype=torch.bfloat16, device=DEVICE)
    new_state = torch.zeros((N, 8, 128, 128), dtype=torch.float32, device=DEVICE)
    fn(*inputs[:9], 0.0, out, new_state)
    ref_out, ref_state = recurrent_packed(*[x.cpu() for x in inputs], 0.0)
    for got, ref in ((out.cpu().double()[cu[0]:cu[-1]], ref_out[cu[0]:cu[-1]]), (new_state.cpu().double(), ref_state)):
        assert torch.equal(got.isnan(), ref.isnan()), "NaN where the reference has none, or none where it has"
        fin = ~ref.isnan()
        err = (got[fin] - ref[fin]).abs()
        assert int(((err > 1e-2) & (err / (ref[fin].abs() + 1e-8) > 1e-2)).sum()) == 0, f"max abs {err.max():.3g}"


def test_a_first_sequence_that_starts_after_token_0():
    # tokens 0..2 belong to no sequence: sequence 0 must be walked from its own start (a kernel that assumes
    # cu_seqlens[0] == 0, e.g. to load the first chunk before cu_seqlens arrives, fails here). The table's row for
    # this call (one launch) at BV = 64: where a chain starts does not depend on its value slice (2 V slices a head
    # instead of 16 to interpret)
    cu = [3, 10, 30]
    assert lt.pick(30, 2) is lt.ONE_LAUNCH
    _check_rows(cu, make_inputs([0] + cu[1:], seed=6)[:8] + [torch.tensor(cu, device=DEVICE)],
                with_cfg(replace(lt.ONE_LAUNCH, BV=64)))


def test_a_nan_in_one_sequence_stays_there():
    # sequence 0 is shorter than a chunk: a chunk read from token 0 spans sequence 1's first tokens, where a NaN
    # must not reach sequence 0's output or state. The table's row for this call (one launch) at BV = 64, as above
    # (value columns never mix: the NaN's column 7 is NaN in sequence 1 only, at any BV)
    cu = [0, 5, 20]
    assert lt.pick(20, 2) is lt.ONE_LAUNCH
    inputs = make_inputs(cu, seed=7)
    inputs[2][5, 0, 7] = float("nan")
    _check_rows(cu, inputs, with_cfg(replace(lt.ONE_LAUNCH, BV=64)))


def test_rank_table_written_by_the_first_launch():
    # two launches, longest first: the prep launch writes one row (n, bos, eos) per rank, longest first, ties by
    # index (N = 5 pads the rank vector to 8; three sequences tie at 10 tokens); the chain reads its row from it
    cu = [0, 10, 20, 25, 35, 36]
    run_and_check(with_cfg(replace(lt.TWO_LAUNCH_T, lpt=True)), cu, seed=4, out_atol=2e-3)
    table = workspace("perm").view(-1, 4)[:, :3].cpu().tolist()
    order = sorted(range(5), key=lambda i: (-(cu[i + 1] - cu[i]), i))
    assert table == [[i, cu[i], cu[i + 1]] for i in order]


def test_fused_variant_and_its_sync_words():
    # both roles in one launch (cfg "fused"): correct, and each call
    # leaves the counters at 0 and the epoch one higher, so the next call waits for fresh flags. At BV = 64: the
    # sync words do not depend on the value slice, and 2 chain tickets a head are 4x fewer than lt.FUSED's 8 (whose
    # own BV = 16 runs in test_fused_prep_tickets_and_their_flag_planes)
    fn = with_cfg(replace(lt.FUSED, BV=64))
    # the first call has the more slots (T // C + N + 1: 11, then 9; flags past a call's slots belong to other
    # calls), so only it may have to grow (and zero) the words: then its epoch is 1
    old = [buf for (key, dev, _), buf in pk._WORKSPACES.items() if key == "sync" and dev == str(WS_DEVICE)]
    for cu, seed in (([0, 10, 20, 25, 35, 36, 100, 101, 170], 4), ([0, 17, 18, 150, 300], 3)):  # 8 seqs: longest first
        nslot = cu[-1] // 64 + len(cu) - 1 + 1
        grows = not old or old[0].numel() < 3 + 2 * nslot * 8
        epoch = 1 if grows else int(old[0][2]) + 1
        run_and_check(fn, cu, seed=seed, out_atol=2e-3)
        sync = workspace("sync").cpu()
        assert sync[:2].tolist() == [0, 0]
        assert int(sync[2]) == epoch
        assert (sync[3:3 + 2 * nslot * 8] == epoch).all(), "every Tm and P flag holds this call's epoch"
        old = [workspace("sync")]
    assert not grows


def poison_workspaces(cu, C=64):
    """Fill the fp16 Tm and P workspaces of a C-token call on `cu` with NaN (with their k, q and gate blocks): a
    slot nobody writes then poisons the outputs. Returns the number of slots."""
    nslot = cu[-1] // C + (len(cu) - 1) + 1
    pk._workspace("tm16", nslot * 8 * C * C, torch.float16, WS_DEVICE).fill_(float("nan"))
    pk._workspace("p16", nslot * p16_slot_numel(C), torch.float16, WS_DEVICE).fill_(float("nan"))
    return nslot


def test_fused_prep_tickets_and_their_flag_planes():
    # the fused launch's prep role: Tm and P of each (chunk, head) by separate tickets, each with its own flag
    # plane, both awaited by the chains. The workspaces start as NaN, so a slot that neither role wrote would
    # poison the outputs. Also the fused row at the sequence edges of test_next_chunk_loads_at_sequence_edges (same
    # call), and the transposed chain of test_transposed_chain_variant as the fused launch's chain role (lt.FUSED
    # is that test's config at BV = 16, 4 warps, fused)
    assert lt.FUSED == replace(lt.TWO_LAUNCH, BV=16, num_warps=4, num_stages=2, trans=True, fused=True)
    cu = [0, 0, 17, 18, 150, 300]
    nslot = poison_workspaces(cu)
    run_and_check(with_cfg(lt.FUSED), cu, seed=3, out_atol=2e-3)
    sync = workspace("sync").cpu()
    assert sync[:2].tolist() == [0, 0]
    assert (sync[3:3 + 2 * nslot * 8] == int(sync[2])).all(), "both planes hold this call's epoch"


@pytest.mark.parametrize("bv,warps", [(16, 4), (64, 8)])
def test_transposed_chain_variant(bv, warps):
    # the transposed chain (cfg "trans", ALGO_CHUNK_WS_T; the table's fused and N >= 5 rows): the state
    # slice held as [BV, K], a zero-length sequence and a partial last chunk included. As the fused launch's
    # chain role at BV = 16 with 4 warps this config is lt.FUSED, run on the same call (cu and seed 3) by
    # test_fused_prep_tickets_and_their_flag_planes
    cfg = replace(lt.TWO_LAUNCH, BV=bv, num_warps=warps, num_stages=2, trans=True)
    run_and_check(with_cfg(cfg), [0, 0, 17, 18, 150, 300],
                  seed=3, out_atol=2e-3)


def test_prep_writes_every_slot():
    # the two-launch rows' prep: its CTAs compute either Tm or P of a (chunk, head). The workspaces start as NaN,
    # so a slot that neither role wrote would poison the outputs.
    # (also the TWO_LAUNCH_WIDE row at the sequence edges of test_next_chunk_loads_at_sequence_edges: same call)
    cu = [0, 0, 17, 18, 150, 300]
    poison_workspaces(cu)
    run_and_check(with_cfg(lt.TWO_LAUNCH_WIDE), cu, seed=3, out_atol=2e-3)


@pytest.mark.parametrize("trans,bv", [(False, 64), (True, 32)], ids=["untransposed-bv64", "transposed-bv32"])
def test_segment_walk(trans, bv):
    # cfg segs: 4 segments of 2 chunks (C = 16) for the 125-token sequence, so its last segment starts from
    # two transition products; the 5-token sequence ends in segment 0 (new_state from the first segment
    # launch), the 1-token one too, and the empty one has only its new_state (= its state); the first
    # launch's mixed slices are half value, half identity columns (v = 0 for the latter): 32 + 32 columns at
    # BV = 64, 16 + 16 at BV = 32
    cfg = replace(lt.TWO_LAUNCH_T if trans else lt.TWO_LAUNCH, segs=4, BV=bv, C=16, SB=8, lpt=False)
    run_and_check(with_cfg(cfg), [0, 5, 5, 130, 131], seed=5, out_atol=2e-3)


def test_f16_workspace_holds_tm_p_and_the_chunks_k_q_and_gates():
    # the rows with a workspace: per slot the Tm workspace holds the 8 heads' Tm = (I + A)^-1, the P workspace the 8
    # heads' P = (Q K^T) o M tiles, then fp16 copies of k and q of the 4 q/k heads (rows past a sequence's end 0;
    # exact but for values below 2^-14), then per v-head gamma = exp(G), beta, exp(G_end - G) and G log2(e) in fp32
    # (G: the in-chunk cumulative log gate). Checked against the inputs and float64 math, slot by slot.
    from reference.gdn_recurrent import gates
    cu, C = [0, 0, 17, 150], 64
    poison_workspaces(cu)
    fn = with_cfg(lt.TWO_LAUNCH_WIDE)
    assert fn.cfg.ws
    run_and_check(fn, cu, seed=7, out_atol=2e-3)
    inputs = [x.cpu() for x in make_inputs(cu, seed=7)]
    q, k, a, b = inputs[0], inputs[1], inputs[5], inputs[7]
    g, beta = gates(inputs[4], a, inputs[6], b)
    ws = workspace("p16").cpu()
    tm = workspace("tm16").cpu().view(-1, 8, C, C).double()
    per_slot = 8 * C * C + 2 * 4 * C * 128 + 8 * 8 * C
    lower = torch.ones(C, C, dtype=torch.bool).tril(-1)
    causal = torch.ones(C, C, dtype=torch.bool).tril()
    checked = 0
    for n in range(len(cu) - 1):
        bos, eos = cu[n], cu[n + 1]
        for j, c0 in enumerate(range(bos, eos, C)):
            slot = bos // C + n + j
            rows = min(C, eos - c0)
            blk = ws[slot * per_slot:(slot + 1) * per_slot]
            kq = blk[8 * C * C:8 * C * C + 2 * 4 * C * 128].view(4, 2, C, 128)
            gb = blk[8 * C * C + 2 * 4 * C * 128:].view(torch.float32).view(8, 4, C).double()
            for hq in range(4):
                for which, src in ((0, k), (1, q)):
                    got, exp = kq[hq, which, :rows].float(), src[c0:c0 + rows, hq].float()
                    normal = exp.abs() >= 2.0 ** -14     # a bf16 value in fp16's normal range is exact there
                    assert torch.equal(got[normal], exp[normal])
                    assert (got - exp).abs().max() <= 2.0 ** -25     # subnormals: to the nearest 2^-24
                    assert not kq[hq, which, rows:].any()
            G = torch.cumsum(torch.log(g[c0:c0 + rows]), 0)          # [rows, 8]
            G = torch.cat([G, G[-1:].expand(C - rows, 8)])            # rows past the end add 0
            bt = torch.cat([beta[c0:c0 + rows], torch.zeros(C - rows, 8)])   # [C, 8]; 0 past the end
            want = torch.stack([torch.exp(G), bt, torch.exp(G[-1:] - G), G / math.log(2)]).permute(2, 0, 1)
            assert torch.allclose(gb, want, rtol=1e-5, atol=1e-6), (n, j)     # [8, 4, C]
            kc = torch.cat([k[c0:c0 + rows].double(), torch.zeros(C - rows, 4, 128)])
            qc = torch.cat([q[c0:c0 + rows].double(), torch.zeros(C - rows, 4, 128)])
            p_ws = blk[:8 * C * C].view(8, C, C).double()
            # fp16 tiles: to about 2^-11 relative; on the GPU Tm's doubling merges also take fp16 operands
            tm_tol = dict(rtol=1e-2, atol=2e-3) if ON_GPU else dict(rtol=2e-3, atol=1e-4)
            for h in range(8):
                decay = torch.exp(G[:, None, h] - G[None, :, h])
                A = torch.where(lower, bt[:, None, h] * decay, 0.0) * (kc[:, h // 2] @ kc[:, h // 2].T)
                tm_want = torch.linalg.inv(torch.eye(C, dtype=torch.float64) + A)
                assert torch.allclose(tm[slot, h], tm_want, **tm_tol), (n, j, h)
                p_want = torch.where(causal, decay, 0.0) * (qc[:, h // 2] @ kc[:, h // 2].T)
                assert torch.allclose(p_ws[h], p_want, rtol=2e-3, atol=1e-4), (n, j, h)
            checked += 1
    assert checked == 4


def test_segment_walk_refuses_what_it_cannot_run():
    inputs = make_inputs([0, 40])
    out, ns = torch.empty(40, 8, 128, dtype=torch.bfloat16, device=DEVICE), torch.empty_like(inputs[3])
    with pytest.raises(ValueError, match="segs"):
        pk._launch(pk.ALGO_CHUNK, *inputs, 0.0, out, ns, cfg=replace(lt.TWO_LAUNCH, segs=2))


def test_rows_with_a_prep_take_it_on_mma_v3_and_fuse_it_up_to_1400_tokens():
    # every two-launch row (the segment rows included) and the fused rows (up to 1400 tokens)
    rows = [(row.max_t, row.config) for row in lt.LAUNCH_TABLE if row.config.ws]
    assert len(rows) == 11
    for max_t, cfg in rows:
        assert cfg.prep_mma_v3 and (cfg.no_wgmma is None or cfg.no_wgmma.prep_mma_v3), (max_t, cfg)
        assert cfg.fused == (max_t is not None and max_t <= 1400), (max_t, cfg)


def test_raw_launch_arguments_refuse_a_tensor_on_another_device():
    # the bound launch hands the launcher raw pointers, which it does not check (a CPU tensor would be an
    # illegal address on the GPU), so _raw checks the device itself
    x = torch.arange(4.0)
    assert pk._raw("q", x, x.device) == x.data_ptr() and pk._raw("N", 3, x.device) == 3
    with pytest.raises(ValueError, match="state is on cpu, the call runs on cuda:0"):
        pk._raw("state", x, torch.device("cuda", 0))


def test_bound_launch_only_where_triton_hands_constexprs_to_the_launcher():
    # 3.3 changed what a compiled kernel's launcher takes; older Triton must use the plain launch path
    assert pk._triton_passes_constexprs("3.6.0") and pk._triton_passes_constexprs("3.3.1+git1234")
    assert pk._triton_passes_constexprs("4.0.0")
    assert not pk._triton_passes_constexprs("3.2.0") and not pk._triton_passes_constexprs("2.3.1")


def test_launch_table():
    one, two, wide = lt.ONE_LAUNCH, lt.TWO_LAUNCH_LPT, lt.TWO_LAUNCH_WIDE
    two_t, seg, seg1 = lt.TWO_LAUNCH_T, lt.SEG, lt.SEG_ONE
    # the chains of these rows untransposed on wgmma (off sm_90 the config before: no_wgmma)
    fused3, fused3w, fused_wg = lt.FUSED_WG_3STAGE, lt.FUSED_WG_3STAGE_32, lt.FUSED_WG
    wg, wg32 = lt.TWO_LAUNCH_WG, lt.TWO_LAUNCH_WG32
    pick = lt.pick
    assert pick(1, 1) is one and pick(150, 1) is one and pick(151, 1) is fused3 and pick(16, 16) is one
    assert pick(2, 2) is one and pick(180, 2) is one and pick(181, 2) is fused3 and pick(250, 3) is one
    assert (one.C, one.BV, one.num_warps) == (16, 8, 2)
    assert pick(160, 1) is fused3 and pick(899, 1) is fused3 and pick(1400, 2) is fused3
    assert pick(251, 3) is fused3w and pick(599, 3) is fused3w and pick(251, 4) is fused_wg
    assert pick(599, 57) is fused_wg
    # N >= 3 from 600 tokens: two launches (the transposed BV = 32 below 3000 tokens)
    assert pick(600, 3) is wide and pick(1400, 3) is wide and pick(600, 4) is wide and pick(1400, 57) is wide
    # segments for one sequence from 900 tokens (up to 2999 one CTA an SM) and for two from 1401, else two launches
    assert pick(900, 1) is seg1 and pick(1400, 1) is seg1 and pick(1401, 1) is seg1 and pick(2999, 1) is seg1
    assert pick(3000, 1) is seg and pick(8192, 1) is seg
    assert pick(1401, 2) is seg and pick(2999, 2) is seg and pick(8192, 2) is seg
    assert seg1 == replace(seg, seg_one_per_sm=True) and not seg.seg_one_per_sm
    assert pick(1401, 3) is wide and pick(1401, 4) is wide and pick(2999, 57) is wide
    assert pick(3000, 3) is two and pick(8192, 4) is two and seg.segs == 3 and seg.trans
    # wgmma BV32 for N = 5..15
    assert pick(3000, 5) is wg32 and pick(8192, 15) is wg32 and wg32.no_wgmma is two_t
    assert wg32.BV == 32 and wg32.num_stages == 2 and wg32.chain_mma_v3
    assert pick(3000, 16) is wg and pick(8192, 20) is wg and pick(8192, 57) is wg
    assert not one.ws and fused_wg.fused and fused_wg.ws and not two.fused and not seg.fused
    assert two.lpt and two_t.lpt is None and wide.lpt is None
    assert two.BV == two_t.BV == fused_wg.BV == fused3.BV == seg.BV == 16 and wide.BV == fused3w.BV == 32
    assert wg.BV == 64 and wg.num_stages == 2 and wg.chain_mma_v3 and wg.no_wgmma is wide
    assert fused3.num_stages == fused3w.num_stages == 3 and fused3.fused and fused_wg.num_stages == 2
    assert two_t.trans and wide.trans and not two.trans
    for cfg in (fused3, fused3w, fused_wg, wg, wg32):    # every wgmma row: untransposed, with a fallback
        old = cfg.no_wgmma
        assert not cfg.trans and old.trans and old.no_wgmma is None
        assert cfg.prep_mma_v3 or cfg.chain_mma_v3
        assert replace(cfg, trans=True, BV=old.BV, num_stages=old.num_stages, no_wgmma=None, chain_mma_v3=False,
                       prep_mma_v3=False) == replace(old, chain_mma_v3=False, prep_mma_v3=False)
    for T, N in [(6, 1), (300, 3), (8192, 57)]:
        cfg = pick(T, N)
        assert D % cfg.BV == 0 and cfg.C % cfg.SB == 0
    # 3 stages on the two-launch rows and in the segment launches
    assert two.num_stages == two_t.num_stages == wide.num_stages == seg.num_stages == 3
    # the recurrent ablation's own config
    assert (lt.RECURRENT.C, lt.RECURRENT.BV, lt.RECURRENT.num_warps, lt.RECURRENT.num_stages) == (64, 16, 1, 1)


@pytest.mark.parametrize("cu", [[0, 3, 20], [0, 17, 18, 40, 70]],
                         ids=lambda c: "cu" + "-".join(map(str, c)))
def test_recurrent_ablation(cu):
    # the entry point at its own config (BV = 16) on two sequences; the four sequences (a length-1 one among them)
    # through the same launch path at BV = 64 (the token step does not depend on the value slice; 2 V slices a head
    # instead of 8, which the interpreter runs one after another)
    if len(cu) == 3:
        run_and_check(pk.kernel_recurrent, cu, seed=4)
    else:
        def fn(*args):
            pk._launch(pk.ALGO_RECURRENT, *args, cfg=replace(lt.RECURRENT, BV=64))
        run_and_check(fn, cu, seed=4)


def test_entry_point_signature():
    import inspect
    names = list(inspect.signature(pk.kernel).parameters)
    assert names == ["q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens", "scale",
                     "output", "new_state"]
    assert list(inspect.signature(pk.kernel_recurrent).parameters) == names


# GPU: every entry of the launch table and the ablation on contest-sized shapes (production operand
# precisions, official rule; errors must not grow with sequence length)
LONG_CASES = {   # name: (cu_seqlens, the launch-table row it must take)
    "one-launch-T16-N1": ([0, 16], 0),
    "one-launch-T150-N1": ([0, 150], 0),
    "fused3-T151-N1": ([0, 151], 1),
    "one-launch-T32-N2": ([0, 7, 32], 3),
    "one-launch-T180-N2": ([0, 1, 180], 3),
    "fused3-T181-N2": ([0, 167, 181], 4),
    "one-launch-T16-N3": ([0, 5, 6, 16], 5),
    "one-launch-T250-N3": ([0, 60, 130, 250], 5),
    "fused3-T200-N1": ([0, 200], 1),
    "fused3-T899-N1": ([0, 899], 1),
    "fused3-T983-N2": ([0, 886, 983], 4),
    "fused3-T599-N3": ([0, 500, 501, 599], 6),
    "fused3-T255-N3": ([0, 126, 200, 255], 6),
    "fused-split-T599-N4": ([0, 203, 400, 401, 599], 7),
    "fused-split-T599-N20": ([round(i * 599 / 20) for i in range(21)], 7),
    "two-launch-T661-N3": ([0, 500, 501, 661], 9),
    "two-launch-T832-N4": ([0, 303, 600, 601, 832], 9),
    "two-launch-T899-N20": ([round(i * 899 / 20) for i in range(21)], 9),
    "two-launch-T959-N4": ([0, 303, 600, 601, 959], 9),
    "two-launch-T1400-N20": ([i * 70 for i in range(21)], 9),
    "seg-one-T900-N1": ([0, 900], 2),
    "seg-one-T1377-N1": ([0, 1377], 2),
    "seg-one-T2107-N1": ([0, 2107], 2),
    "seg-T2040-N2": ([0, 1879, 2040], 8),
    "two-launch-T2999-N40": ([round(i * 2999 / 40) for i in range(41)], 9),
    "seg-T8192-N1": ([0, 8192], 10),
    "seg-T5709-N2": ([0, 5258, 5709], 10),
    "two-launch-T8192-N3": ([0, 5000, 5001, 8192], 11),
    "two-launch-wg32-T4124-N15": ([round(i * 4124 / 15) for i in range(16)], 12),
    "wgmma-T3000-N16": ([round(i * 3000 / 16) for i in range(17)], 13),
    "wgmma-T8192-N20": ([round(i * 8192 / 20) for i in range(21)], 13),
    "wgmma-T8192-N57": ([round(i * 8192 / 57) for i in range(58)], 13),
    "wgmma-T8192-N25": ([0] + [round(i * 8192 / 25) + 1 for i in range(1, 25)] + [8192], 13),
    "wgmma-T3000-N40": ([round(i * 3000 / 40) for i in range(41)], 13),
}


@pytest.mark.gpu
@pytest.mark.parametrize("cu,row", list(LONG_CASES.values()), ids=list(LONG_CASES))
def test_gpu_launch_table_on_contest_shapes(cu, row):
    assert lt.pick(cu[-1], len(cu) - 1) is lt.LAUNCH_TABLE[row].config
    out_err, state_err = run_and_check(pk.kernel, cu, seed=7, out_atol=2e-3)
    print(f"\n{cu[-1]} tokens, {len(cu) - 1} seqs: output max abs err {out_err:.3g}, state {state_err:.3g}")


@pytest.mark.gpu
@pytest.mark.parametrize("row", ["FUSED_WG_3STAGE", "FUSED_WG_3STAGE_32", "FUSED_WG", "TWO_LAUNCH_WG",
                                 "TWO_LAUNCH_WG32"])
def test_gpu_wgmma_rows(row, monkeypatch):
    # Triton 3.6 miscompiled earlier chains on wgmma (the BV32 chain with 1 stage made an illegal access), so every
    # wgmma row is checked at its own config on shapes beside the table's, twice each;
    # then as a GPU without wgmma runs it (a B200): its "no_wgmma" config, whose last launch has fewer wgmma ops
    cfg = getattr(lt, row)
    inputs = make_inputs([0, 300, 1400], 3)
    out, ns = torch.empty(1400, 8, 128, dtype=torch.bfloat16, device=DEVICE), torch.empty_like(inputs[3])
    wgmma_ops = []
    for wgmma in (True, False):
        if not wgmma:
            monkeypatch.setattr(pk, "has_wgmma", lambda device: False)
        for cu, seeds in (([0, 2107], (11, 12)), ([0, 1, 700, 1400], (11, 12)),
                          ([round(i * 2999 / 40) for i in range(41)], (11, 12)),
                          ([round(i * 8192 / 57) for i in range(58)], (11,))):
            for seed in seeds:
                run_and_check(with_cfg(cfg), cu, seed=seed, out_atol=2e-3)
        handle = pk._launch(pk.ALGO_CHUNK, *inputs, 0.0, out, ns, cfg=cfg)
        wgmma_ops.append(handle.asm["ptx"].count("wgmma.mma_async"))
    assert wgmma_ops[0] > wgmma_ops[1], wgmma_ops


@pytest.mark.gpu
@pytest.mark.parametrize("bv,warps,fused", [(16, 4, False), (32, 4, False), (64, 8, False), (16, 4, True)])
def test_gpu_transposed_chain(bv, warps, fused):
    # the transposed chain with production precisions (its state dots split the left operand)
    cfg = replace(lt.TWO_LAUNCH, BV=bv, num_warps=warps, num_stages=2, trans=True, fused=fused)
    for cu in ([0, 2107], [round(i * 8192 / 57) for i in range(58)]):
        run_and_check(with_cfg(cfg), cu, seed=7, out_atol=2e-3)


@pytest.mark.gpu
def test_gpu_prep_on_mma_sync():
    # the prep on mma.sync (what a B200 runs, MMAv5 off), with production precisions, on the table's wide row
    cfg = replace(lt.TWO_LAUNCH_WIDE, prep_mma_v3=False)
    for cu in ([0, 2107], [round(i * 8192 / 57) for i in range(58)]):
        run_and_check(with_cfg(cfg), cu, seed=7, out_atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("mma_v3", [False, True])
def test_gpu_fused_prep_lowering(mma_v3):
    # the fused launch's prep role on mma.sync (what a B200 runs, MMAv5 off) or on wgmma (the table's fused
    # rows; the transposed chain role's dots stay mma.sync); twice each, so the second call waits on fresh flags
    fn = with_cfg(replace(lt.FUSED, prep_mma_v3=mma_v3))
    for cu in ([0, 2107], [round(i * 2999 / 40) for i in range(41)]):
        for seed in (11, 12):
            run_and_check(fn, cu, seed=seed, out_atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("row", ["FUSED", "TWO_LAUNCH", "TWO_LAUNCH_T", "TWO_LAUNCH_WIDE"])
def test_gpu_workspace_rows(row):
    # the rows with a workspace (next chunk's loads a step early; the two-launch ones with N = 57 longest first from
    # the rank table the prep launch writes); twice each
    fn = with_cfg(getattr(lt, row))
    for cu in ([0, 5000, 5001, 8192], [0, 17, 18, 150, 300], [round(i * 8192 / 57) for i in range(58)]):
        for seed in (11, 12):
            run_and_check(fn, cu, seed=seed, out_atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("row", ["TWO_LAUNCH", "TWO_LAUNCH_T"])
@pytest.mark.parametrize("segs", [4, 8])
def test_gpu_segment_walk(row, segs):
    # cfg "segs" at contest lengths: a 5258-token sequence (82 chunks) with a short one, one 2107-token sequence,
    # three sequences of which one ends in segment 0; the errors must not grow with the number of products
    fn = with_cfg(replace(getattr(lt, row), segs=segs, lpt=False))
    for cu in ([0, 5258, 5709], [0, 2107], [0, 1300, 1301, 1400], [0, 0, 3000]):
        out_err, state_err = run_and_check(fn, cu, seed=11, out_atol=2e-3)
        print(f"\n{row} segs {segs} {cu}: output max abs err {out_err:.3g}, state {state_err:.3g}")


@pytest.mark.gpu
def test_gpu_fused_f16_chains_wait_for_the_k_q_copies():
    # the fused launch: an odd v-head's chain reads the k and q copies that the prep ticket of the
    # even v-head of its q/k head writes, so it must wait for that ticket's flags too (a harness pass at 0b460fc
    # failed 1592/3 without it). The workspaces are NaN before every call: a copy read before it is written
    # poisons the outputs.
    fn = with_cfg(lt.FUSED)
    for cu in ([0, 1320, 1500, 1592], [round(i * 2999 / 40) for i in range(41)]):
        for seed in range(5):
            poison_workspaces(cu)
            run_and_check(fn, cu, seed=seed, out_atol=2e-3)


def test_dependent_launches_only_where_gpu_and_triton_have_them():
    # PDL needs sm_90 or later and Triton's gdc_* (3.4 and later); a GPU that has it under an older Triton says so
    pdl = load_solution(DEFINITION, "pdl")
    assert pdl.pdl_usable(9, True) and pdl.pdl_usable(10, True)
    assert not pdl.pdl_usable(8, True) and not pdl.pdl_usable(8, False)
    with pytest.warns(UserWarning, match="without programmatic dependent launch"):
        assert not pdl.pdl_usable(10, False)


# the calls of two or three launches: the table's rows with a workspace but no fused launch
DEPENDENT_CASES = [name for name, (cu, row) in LONG_CASES.items()
                   if lt.LAUNCH_TABLE[row].config.ws and not lt.LAUNCH_TABLE[row].config.fused]


@pytest.mark.gpu
@pytest.mark.parametrize("name", DEPENDENT_CASES)
def test_gpu_dependent_launches_wait_for_the_launch_before(name):
    # the launches after the first of such a call are programmatic dependent launches (pdl.py): they start before
    # the launch before them has ended and must wait in the kernel before reading what it wrote. Every workspace
    # (Tm, P, the k/q copies and gates, the segment maps) is NaN before each call, so a read before the write
    # poisons the outputs.
    cu, row = LONG_CASES[name]
    T, N = cu[-1], len(cu) - 1
    inputs = make_inputs(cu, 0)
    out = torch.empty(T, 8, 128, dtype=torch.bfloat16, device=DEVICE)
    handle = pk._launch(pk.ALGO_CHUNK, *inputs, 0.0, out, torch.empty_like(inputs[3]))
    assert handle.metadata.launch_pdl               # the call's last launch was a dependent one
    segs = lt.LAUNCH_TABLE[row].config.segs
    for seed in range(3):
        poison_workspaces(cu)
        for ws in ("seg_e", "seg_x", "seg_h") if segs else ():
            pk._workspace(ws, N * (segs - 1) * 8 * 128 * 128, torch.float32, WS_DEVICE).fill_(float("nan"))
        run_and_check(pk.kernel, cu, seed=seed, out_atol=2e-3)


@pytest.mark.gpu
def test_gpu_recurrent_ablation_long():
    run_and_check(pk.kernel_recurrent, [0, 3000, 4096], seed=8)


@pytest.mark.gpu
@pytest.mark.parametrize("cu", [[0, 200], [0, 2107], [round(i * 8192 / 57) for i in range(58)]],
                         ids=["T200-N1", "T2107-N1", "T8192-N57"])
def test_gpu_fused_variant(cu):
    # the fused variant's roles really run concurrently here (the interpreter runs CTAs one by one);
    # twice, so the second call must wait for its own epoch's flags
    # the table's entry, BV = 32, and the untransposed chain role
    untransposed = replace(lt.FUSED, num_stages=3, trans=False, prep_mma_v3=False)
    for cfg in (lt.FUSED, replace(lt.FUSED, BV=32), untransposed):
        fn = with_cfg(cfg)
        for seed in (11, 12):
            run_and_check(fn, cu, seed=seed, out_atol=2e-3)


class _RecordingKernel:
    """A compiled kernel as Triton's runner sees it (CompiledKernel's attributes), whose launcher is Triton's own
    CudaLauncher class with the C function replaced by a recorder (no GPU, no compiled module)."""

    def __init__(self, calls, **launcher_attrs):
        from triton.backends.nvidia.driver import CudaLauncher
        self._run = CudaLauncher.__new__(CudaLauncher)
        attrs = dict(dict(num_ctas=1, global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0,
                          profile_scratch_align=1, launch_cooperative_grid=False, launch_pdl=True), **launcher_attrs)
        for name, value in attrs.items():
            setattr(self._run, name, value)
        self._run.launch = lambda *a: calls.append(a)
        self.function, self.packed_metadata, self.name = 1234, (4, 1, 107008), "k"
        self.src = types.SimpleNamespace(fn=types.SimpleNamespace(launch_metadata=None))

    def _init_handles(self):
        pass

    run = property(lambda self: self._run)
    launch_metadata = triton.compiler.compiler.CompiledKernel.launch_metadata
    __getitem__ = triton.compiler.compiler.CompiledKernel.__getitem__


def test_lean_launch_hands_the_c_launcher_what_tritons_runner_does():
    # the bound launch skips Triton's Python layers between launches; the C function must get the same grid,
    # stream, function, flags, metadata and kernel arguments, and no hook call (the hook chains are empty)
    if pk._triton_version(triton.__version__) != (3, 6):
        pytest.skip(f"the lean launch is for Triton 3.6 (here {triton.__version__}: the refusal is tested below)")
    argv, grid = [111, 222, 0.5, 3, 4, True], (4, 32, 1)
    via_triton, lean = [], []
    _RecordingKernel(via_triton)[grid](*argv, stream=77)
    launch, args = pk._issue(_RecordingKernel(lean), grid, 77, argv)
    launch(*args)
    assert len(via_triton) == len(lean) == 1
    t, ours = via_triton[0], lean[0]
    assert ours[:10] == t[:10] and ours[13:] == t[13:]      # all but the launch metadata and the two hook chains
    assert t[11] is not None and t[12] is not None and not t[11].calls and not t[12].calls
    assert ours[10:13] == (None, None, None) and ours[:5] == (4, 32, 1, 77, 1234) and ours[13:] == tuple(argv)


def test_lean_launch_reserves_shared_memory_only_above_the_kernels_own(monkeypatch):
    # a launch that must run one CTA an SM asks for more shared memory than its kernel uses; Triton lifts a
    # function's dynamic limit only for kernels above 48 KB, so below that the reservation is refused, with a warning
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    argv, grid = [1, 2], (4, 2, 8)
    for shared, sent in ((0, 107008), (50000, 107008), (116737, 116737)):
        calls = []
        launch, args = pk._issue(_RecordingKernel(calls), grid, 5, argv, shared)
        launch(*args)
        assert calls[0][9] == (4, 1, sent) and calls[0][:3] == grid and calls[0][13:] == tuple(argv)
    small = _RecordingKernel([])
    small.packed_metadata = (4, 1, 40000)
    pk._warn_once.cache_clear()
    with pytest.warns(UserWarning, match="uses 40000 bytes of shared memory, so no launch of it may reserve 116737"):
        launch, args = pk._issue(small, grid, 5, argv, 116737)
    assert args[9] == (4, 1, 40000)


def test_lean_launch_refused_where_triton_must_run_its_own_layers(monkeypatch):
    argv, grid = [1, 2], (1, 1, 1)
    monkeypatch.setattr(triton, "__version__", "3.7.0")
    pk._warn_once.cache_clear()
    with pytest.warns(UserWarning, match="checked on 3.6 only"):
        launch, args = pk._issue(_RecordingKernel([]), grid, 5, argv)
    assert args == argv
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    for attrs in ({"global_scratch_size": 64}, {"profile_scratch_size": 8}):
        pk._warn_once.cache_clear()
        with pytest.warns(UserWarning, match="scratch memory"):
            launch, args = pk._issue(_RecordingKernel([], **attrs), grid, 5, argv)
        assert args == argv
    hook = lambda metadata: None  # noqa: E731
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        pk._warn_once.cache_clear()
        with pytest.warns(UserWarning, match="launch_enter_hook is set"):
            launch, args = pk._issue(_RecordingKernel([]), grid, 5, argv)
        assert args == argv
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
