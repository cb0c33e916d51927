"""The naive PyTorch starter kits in examples/: each passes the harness's correctness check on the CPU
(official per-element rule, atol = rtol = 1e-2) on a few small workloads, and each matches a tiny case
worked out by hand in float64, independently of the definition's reference."""
import importlib.util
import math
from pathlib import Path

import pytest
import torch

from harness.data.dataset import Dataset
from harness.eval.options import EvalOptions
from harness.eval.loop import evaluate
from harness.eval.child import TimingConfig
from harness.data.starter_kit import load_starter_kit

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
SMALL_WORKLOADS = {
    DECODE: ["901e5104", "ec9d2340"],    # B = 1, B = 4
    PREFILL: ["77daf91d", "2ba465c0"],   # T = 6 (N = 1), T = 28 (N = 2)
}
HV, HK, D = 8, 4, 128


@pytest.mark.parametrize("definition", [DECODE, PREFILL])
def test_kit_passes_the_harness_on_cpu(tmp_path, definition):
    ds = Dataset()
    d = ds.definition(definition)
    workloads = [w for w in ds.workloads(d) if w.uuid[:8] in SMALL_WORKLOADS[definition]]
    assert len(workloads) == len(SMALL_WORKLOADS[definition])
    sol = load_starter_kit(EXAMPLES / definition)
    assert (sol.definition, sol.author, sol.spec.language) == (definition, "example", "python")
    assert sol.spec.destination_passing_style
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), isolation="none",
                       show_progress=False, prestart=0, profile_baseline=False,
                       reference_cache=tmp_path / "ref.json")
    results = evaluate(ds, d, workloads, [sol], opts)
    assert len(results) == len(workloads)
    for r in results:
        ev = r.trace.evaluation
        assert ev.status.value == "PASSED", f"{r.workload.uuid}: {ev.status.value}\n{ev.log[-2000:]}"
        assert ev.correctness.max_absolute_error < 1e-2


# ---- hand-built cases, independent of the harness and of the definition's reference ----

def _kit_module(definition):
    path = EXAMPLES / definition / "solution" / "python" / "main.py"
    spec = importlib.util.spec_from_file_location(f"example_kit_{definition}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gate(A_log, a, dt_bias):
    """g = exp(-exp(A_log) * softplus(a + dt_bias)), in float64."""
    return math.exp(-math.exp(A_log) * math.log1p(math.exp(a + dt_bias)))


def _beta(b):
    return 1.0 / (1.0 + math.exp(-b))


def _unit_key_step(S, j, g, beta, v):
    """One delta-rule step on a k-last [V, K] float64 state when k = e_j (unit vector):
    S' = g S; S' k = S'[:, j]; v_new = beta (v - S'[:, j]); S_new = S' + v_new e_j^T, so only column j
    changes and becomes (1 - beta) g S[:, j] + beta v."""
    S = g * S
    S[:, j] = (1 - beta) * S[:, j] + beta * v
    return S


def _params():
    """Per v-head decay parameters (fp32-exact), and the unit-vector index of each q/k head: k head c is
    e_{3c+1}, q head c is e_{3c+1} (c even: reads the column just written) or e_{3c+2} (c odd: reads an
    untouched column, which only decays). A wrong GQA map (h % 4 instead of h // 2) or a k-first state
    (row j written instead of column j) changes the result."""
    A_log = torch.tensor([-1.0, -0.5, 0.0, 0.25, 0.5, -2.0, 1.0, -0.25])
    dt_bias = torch.tensor([0.5, -1.0, 0.0, 1.0, -0.5, 2.0, 0.25, -2.0])
    k_idx = [3 * c + 1 for c in range(HK)]
    q_idx = [3 * c + 1 + (c % 2) for c in range(HK)]
    return A_log, dt_bias, k_idx, q_idx


def _unit_rows(idx, lead):
    """[*lead, len(idx), D] bf16 with row c = e_{idx[c]}."""
    x = torch.zeros(*lead, len(idx), D)
    for c, j in enumerate(idx):
        x[..., c, j] = 1.0
    return x.to(torch.bfloat16)


def test_decode_kit_matches_a_hand_worked_case():
    kit = _kit_module(DECODE)
    gen = torch.Generator().manual_seed(1)
    B = 2
    A_log, dt_bias, k_idx, q_idx = _params()
    q, k = _unit_rows(q_idx, (B, 1)), _unit_rows(k_idx, (B, 1))
    v = (torch.randint(-8, 9, (B, 1, HV, D), generator=gen) / 4).to(torch.bfloat16)    # bf16-exact
    a = torch.tensor([[-1.0, 0.0, 0.5, 2.0, -0.5, 1.0, 0.0, -2.0]] * B).view(B, 1, HV).to(torch.bfloat16)
    b = torch.tensor([[0.0, 1.0, -1.0, 2.0, -3.0, 0.5, 4.0, -0.5]] * B).view(B, 1, HV).to(torch.bfloat16)
    b[1] = -b[1]
    state = torch.randn(B, HV, D, D, generator=gen)
    state[0] = 0.0                                   # sequence 0 from a zero state, sequence 1 from a full one
    output = torch.full((B, 1, HV, D), float("nan"), dtype=torch.bfloat16)
    new_state = torch.full((B, HV, D, D), float("nan"))
    before = state.clone()
    kit.run(q, k, v, state, A_log, a, dt_bias, b, 0.0, output, new_state)   # scale 0: 1/sqrt(128)
    assert torch.equal(state, before), "the kit wrote into its input state"

    scale = 1 / math.sqrt(D)
    for s in range(B):
        for h in range(HV):
            g = _gate(A_log[h].item(), a[s, 0, h].item(), dt_bias[h].item())
            beta = _beta(b[s, 0, h].item())
            c = h // 2                               # GVA: v-head h reads q/k head h // 2
            S = _unit_key_step(state[s, h].double(), k_idx[c], g, beta, v[s, 0, h].double())
            torch.testing.assert_close(new_state[s, h].double(), S, rtol=1e-5, atol=1e-6)
            o = scale * S[:, q_idx[c]]               # S_new q with q = e_i: column i
            torch.testing.assert_close(output[s, 0, h].double(), o, rtol=4e-3, atol=1e-6)  # bf16 rounding
    # the zero-state sequence, on a head whose q reads the column just written: o = scale * beta * v, whatever g
    torch.testing.assert_close(output[0, 0, 0].double(), scale * _beta(0.0) * v[0, 0, 0].double(), rtol=4e-3, atol=0)


def test_prefill_kit_matches_a_hand_worked_case():
    kit = _kit_module(PREFILL)
    gen = torch.Generator().manual_seed(2)
    A_log, dt_bias, k_idx, q_idx = _params()
    cu_seqlens = torch.tensor([0, 3, 5], dtype=torch.int64)     # two sequences: 3 and 2 tokens
    T, N = 5, 2
    # every token writes the same key columns, so the steps really chain (decay, then overwrite)
    q, k = _unit_rows(q_idx, (T,)), _unit_rows(k_idx, (T,))
    v = (torch.randint(-8, 9, (T, HV, D), generator=gen) / 4).to(torch.bfloat16)
    a = (torch.randint(-4, 5, (T, HV), generator=gen) / 2).to(torch.bfloat16)
    b = (torch.randint(-6, 7, (T, HV), generator=gen) / 2).to(torch.bfloat16)
    state = torch.randn(N, HV, D, D, generator=gen)
    output = torch.full((T, HV, D), float("nan"), dtype=torch.bfloat16)
    new_state = torch.full((N, HV, D, D), float("nan"))
    before = state.clone()
    scale = 0.5
    kit.run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state)
    assert torch.equal(state, before), "the kit wrote into its input state"

    for seq in range(N):
        for h in range(HV):
            c = h // 2
            S = state[seq, h].double()               # each sequence starts from its own state
            for t in range(cu_seqlens[seq].item(), cu_seqlens[seq + 1].item()):
                g = _gate(A_log[h].item(), a[t, h].item(), dt_bias[h].item())
                S = _unit_key_step(S, k_idx[c], g, _beta(b[t, h].item()), v[t, h].double())
                torch.testing.assert_close(output[t, h].double(), scale * S[:, q_idx[c]], rtol=4e-3, atol=1e-6)
            torch.testing.assert_close(new_state[seq, h].double(), S, rtol=1e-5, atol=1e-6)
