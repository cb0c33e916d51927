"""Three formulations of the GDN recurrence agree: the definitions' official references (fp32 math,
bf16 output, executed from the definition JSON), the float64 token recurrence
(reference/gdn_recurrent.py) and the float64 chunked WY/UT form (reference/gdn_chunked.py).
Plus hand checks whose expected values are written down independently of all three."""
import math

import pytest
import torch
import torch.nn.functional as F

from harness.eval.correctness import Tolerance, check_output
from harness.data.dataset import Dataset
from harness.eval.reference import load_reference, run_reference
from reference.gdn_chunked import chunked_packed
from reference.gdn_recurrent import gates, recurrent_decode, recurrent_packed

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
OFFICIAL_SCALE = 0.08838834764831843
HK, HV, D = 4, 8, 128
FP64_TOL = 1e-10          # float64 vs float64
STATE_TOL = 1e-4          # official fp32 state vs float64


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Small tensors: one thread is as fast, and does not stall when other processes share the CPU."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def official():
    ds = Dataset()
    return {name: (ds.definition(name), load_reference(ds.definition(name))) for name in (DECODE, PREFILL)}


def make_packed(cu, seed, gate="model", with_state=True):
    """Packed prefill inputs in the definition dtypes. gate: 'model' (stand-in-like: A_log = log U(1,16),
    dt log-uniform in [1e-3, 1e-1]) or 'strong' (g ~ 1e-35 per token: in-chunk cumulative gates
    underflow float64, which the chunked form must survive without dividing by gamma)."""
    gen = torch.Generator().manual_seed(seed)
    cu = torch.tensor(cu, dtype=torch.int64)
    T, N = int(cu[-1]), len(cu) - 1
    q = F.normalize(torch.randn(T, HK, D, generator=gen), dim=-1).to(torch.bfloat16)
    k = F.normalize(torch.randn(T, HK, D, generator=gen), dim=-1).to(torch.bfloat16)
    v = torch.randn(T, HV, D, generator=gen).to(torch.bfloat16)
    a = torch.randn(T, HV, generator=gen).to(torch.bfloat16)
    b = torch.randn(T, HV, generator=gen).to(torch.bfloat16)
    if gate == "model":
        A_log = torch.log(1 + 15 * torch.rand(HV, generator=gen))
        dt = torch.exp(math.log(1e-3) + math.log(100) * torch.rand(HV, generator=gen))
        dt_bias = dt + torch.log(-torch.expm1(-dt))                      # inverse softplus
    else:
        A_log = torch.full((HV,), math.log(16.0))
        dt_bias = torch.full((HV,), 6.0)
    state = torch.randn(N, HV, D, D, generator=gen) if with_state else None
    return dict(q=q, k=k, v=v, state=state, A_log=A_log.float(), a=a, dt_bias=dt_bias.float(), b=b,
                cu_seqlens=cu, scale=OFFICIAL_SCALE)


def prefill_args(x):
    return [x[n] for n in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens", "scale")]


def decode_args(x):
    """Packed single-token sequences (cu_seqlens = 0..B) as decode's [B, 1, ...] inputs."""
    return [x["q"][:, None], x["k"][:, None], x["v"][:, None], x["state"], x["A_log"], x["a"][:, None],
            x["dt_bias"], x["b"][:, None], x["scale"]]


def assert_official_close(out, new_state, ref_out, ref_state):
    """Official output (bf16) against float64 truth under the official element rule; state max abs."""
    chk = check_output("output", out.float(), ref_out.float(), Tolerance())
    assert chk.status is None, chk.message
    assert chk.matched_ratio == 1.0
    assert new_state.dtype == torch.float32
    err = (new_state.double() - ref_state).abs().max().item()
    assert err < STATE_TOL, err


PREFILL_CASES = {
    "one_seq_T40": ([0, 40], "model"),                   # 2 full chunks + a short one
    "mixed_5_16_19": ([0, 5, 21, 40], "model"),          # shorter than, equal to, longer than C=16
    "len1_seqs": ([0, 1, 2, 18, 35], "model"),           # single-token sequences next to longer ones
    "chunk_multiples": ([0, 16, 32], "model"),
    "strong_decay": ([0, 3, 37], "strong"),
}


@pytest.mark.parametrize("chunk", [16, 5, 64])
@pytest.mark.parametrize("case", list(PREFILL_CASES))
def test_chunked_matches_recurrent(case, chunk):
    cu, gate = PREFILL_CASES[case]
    x = make_packed(cu, seed=list(PREFILL_CASES).index(case), gate=gate)
    o_r, s_r = recurrent_packed(*prefill_args(x))
    o_c, s_c = chunked_packed(*prefill_args(x), chunk=chunk)
    assert o_c.shape == o_r.shape and s_c.shape == s_r.shape
    assert torch.isfinite(o_c).all() and torch.isfinite(s_c).all()
    assert (o_c - o_r).abs().max().item() < FP64_TOL
    assert (s_c - s_r).abs().max().item() < FP64_TOL
    # Outputs are far above the 1e-10 tolerance: the comparison above has something to compare.
    assert o_r.abs().max().item() > 0.01


def test_chunked_without_state_matches_recurrent():
    x = make_packed([0, 7, 30], seed=3, with_state=False)
    o_r, s_r = recurrent_packed(*prefill_args(x))
    o_c, s_c = chunked_packed(*prefill_args(x))
    assert (o_c - o_r).abs().max().item() < FP64_TOL
    assert (s_c - s_r).abs().max().item() < FP64_TOL


@pytest.mark.parametrize("case", list(PREFILL_CASES))
def test_official_prefill_matches_fp64(official, case):
    defn, run = official[PREFILL]
    cu, gate = PREFILL_CASES[case]
    x = make_packed(cu, seed=100 + list(PREFILL_CASES).index(case), gate=gate)
    out, new_state = run_reference(run, defn, prefill_args(x))
    assert out.dtype == torch.bfloat16 and out.shape == (cu[-1], HV, D)
    o_r, s_r = recurrent_packed(*prefill_args(x))
    o_c, s_c = chunked_packed(*prefill_args(x))
    assert_official_close(out, new_state, o_r, s_r)
    assert_official_close(out, new_state, o_c, s_c)


def test_official_prefill_without_state(official):
    defn, run = official[PREFILL]
    x = make_packed([0, 9, 20], seed=11, with_state=False)
    out, new_state = run_reference(run, defn, prefill_args(x))
    assert_official_close(out, new_state, *recurrent_packed(*prefill_args(x)))


@pytest.mark.parametrize("B", [1, 3, 8])
def test_official_decode_matches_fp64(official, B):
    defn, run = official[DECODE]
    x = make_packed(list(range(B + 1)), seed=200 + B)
    out, new_state = run_reference(run, defn, decode_args(x))
    assert out.dtype == torch.bfloat16 and out.shape == (B, 1, HV, D)
    o_r, s_r = recurrent_decode(*decode_args(x))
    o_c, s_c = chunked_packed(*prefill_args(x))
    assert (o_c[:, None] - o_r).abs().max().item() < FP64_TOL
    assert (s_c - s_r).abs().max().item() < FP64_TOL
    assert_official_close(out, new_state, o_r, s_r)


def test_official_decode_equals_official_prefill_on_single_tokens(official):
    """Decode of B sequences is prefill of B one-token sequences: both official references agree."""
    x = make_packed([0, 1, 2, 3, 4], seed=7)
    o_d, s_d = run_reference(official[DECODE][1], official[DECODE][0], decode_args(x))
    o_p, s_p = run_reference(official[PREFILL][1], official[PREFILL][0], prefill_args(x))
    # Same fp32 math, possibly summed in another order: at most a bf16 ulp apart on the output.
    assert ((o_d[:, 0].float() - o_p.float()).abs() <= o_p.float().abs() * 2 ** -7 + 1e-6).all()
    assert (s_d - s_p).abs().max().item() < 1e-5


@pytest.mark.parametrize("scale", [0.0, None])
def test_default_scale(scale):
    x = make_packed([0, 3], seed=5)
    ref = recurrent_packed(*prefill_args(x))
    x["scale"] = scale
    o, _ = recurrent_packed(*prefill_args(x))
    o_c, _ = chunked_packed(*prefill_args(x))
    # The official scale IS 1/sqrt(128); the default must reproduce it.
    assert (o - ref[0]).abs().max().item() < 1e-15
    assert (o_c - ref[0]).abs().max().item() < FP64_TOL


# ---------------------------------------------------------------------------------------------
# Hand checks: expected values written from the math, not from any of the implementations.

def _hand_one_token():
    """One token per sequence, g = 1 (A_log = -100), beta = 1 (b = 100), zero state, dyadic values
    so every product and sum is exact in fp32/fp64 and the bf16 output is exact too."""
    q = torch.zeros(1, HK, D)
    k = torch.zeros(1, HK, D)
    kq = torch.tensor([0.5, -0.25, 1.0, 0.0])                         # k.q per q/k head, by hand
    for h in range(HK):
        k[0, h, 0:4] = 0.5                                             # |k| = 1
    q[0, 0, 0:4] = torch.tensor([0.5, 0.5, -0.5, 0.5])                # k.q = 0.25*(1+1-1+1) = 0.5
    q[0, 1, 0:4] = torch.tensor([-0.5, 0.0, 0.0, 0.0])                # -0.25
    q[0, 2, 0:4] = torch.tensor([0.5, 0.5, 0.5, 0.5])                 # 1.0
    q[0, 3, 4:8] = 0.5                                                 # orthogonal to k: 0
    v = ((torch.arange(HV * D).reshape(1, HV, D) % 32) - 16) / 8.0    # multiples of 1/8 in [-2, 2)
    x = dict(q=q.bfloat16(), k=k.bfloat16(), v=v.bfloat16(), state=torch.zeros(1, HV, D, D),
             A_log=torch.full((HV,), -100.0), a=torch.zeros(1, HV).bfloat16(), dt_bias=torch.zeros(HV),
             b=torch.full((1, HV), 100.0).bfloat16(), cu_seqlens=torch.tensor([0, 1]), scale=0.25)
    exp_state = torch.zeros(1, HV, D, D, dtype=torch.float64)
    exp_out = torch.zeros(1, HV, D, dtype=torch.float64)
    for h in range(HV):
        kh = k[0, h // 2].double()                                     # v-head h reads q/k head h // 2
        exp_state[0, h] = v[0, h].double()[:, None] * kh[None, :]      # S[v, k] = v_v k_k
        exp_out[0, h] = 0.25 * kq[h // 2].item() * v[0, h].double()
    return x, exp_out, exp_state


def test_hand_gates_are_exactly_one():
    x, _, _ = _hand_one_token()
    g, beta = gates(x["A_log"], x["a"], x["dt_bias"], x["b"])
    assert torch.all(g == 1.0) and torch.all(beta == 1.0)


def test_hand_one_token_fp64():
    x, exp_out, exp_state = _hand_one_token()
    for o, s in (recurrent_packed(*prefill_args(x)), chunked_packed(*prefill_args(x)),
                 [t if i else t[:, 0] for i, t in enumerate(recurrent_decode(*decode_args(x)))]):
        assert torch.equal(s, exp_state)
        assert torch.equal(o, exp_out)


def test_hand_one_token_official(official):
    x, exp_out, exp_state = _hand_one_token()
    o_p, s_p = run_reference(official[PREFILL][1], official[PREFILL][0], prefill_args(x))
    o_d, s_d = run_reference(official[DECODE][1], official[DECODE][0], decode_args(x))
    for o, s in ((o_p, s_p), (o_d[:, 0], s_d)):
        assert torch.equal(s.double(), exp_state)
        assert torch.equal(o.double(), exp_out)                        # dyadic: exact in bf16


def _hand_zero_k():
    """k = 0: the delta update vanishes, the state only decays. A_log = 0, a = dt_bias = 0 gives
    g = exp(-1 * softplus(0)) = exp(-ln 2) = 1/2 per token; v and b are arbitrary and must not leak."""
    gen = torch.Generator().manual_seed(42)
    cu = [0, 2, 5]
    T = cu[-1]
    x = dict(q=F.normalize(torch.randn(T, HK, D, generator=gen), dim=-1).bfloat16(),
             k=torch.zeros(T, HK, D).bfloat16(), v=torch.randn(T, HV, D, generator=gen).bfloat16(),
             state=torch.randn(2, HV, D, D, generator=gen), A_log=torch.zeros(HV),
             a=torch.zeros(T, HV).bfloat16(), dt_bias=torch.zeros(HV),
             b=torch.randn(T, HV, generator=gen).bfloat16(), cu_seqlens=torch.tensor(cu), scale=OFFICIAL_SCALE)
    S0 = x["state"].double()
    exp_state = torch.stack([S0[0] * 0.5 ** 2, S0[1] * 0.5 ** 3])
    exp_out = torch.zeros(T, HV, D, dtype=torch.float64)
    for n in range(2):
        for i, t in enumerate(range(cu[n], cu[n + 1])):
            for h in range(HV):
                exp_out[t, h] = OFFICIAL_SCALE * 0.5 ** (i + 1) * (S0[n, h] @ x["q"][t, h // 2].double())
    return x, exp_out, exp_state


def test_hand_zero_k_fp64():
    x, exp_out, exp_state = _hand_zero_k()
    for o, s in (recurrent_packed(*prefill_args(x)), chunked_packed(*prefill_args(x), chunk=2)):
        assert (s - exp_state).abs().max().item() < 1e-14
        assert (o - exp_out).abs().max().item() < 1e-14
        assert exp_out.abs().max().item() > 0.1                        # not a vacuous comparison


def test_hand_zero_k_official(official):
    x, exp_out, exp_state = _hand_zero_k()
    o, s = run_reference(official[PREFILL][1], official[PREFILL][0], prefill_args(x))
    assert (s.double() - exp_state).abs().max().item() < 1e-5
    assert_official_close(o, s, exp_out, exp_state)
