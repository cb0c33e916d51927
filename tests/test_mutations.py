"""Mutation test: the stand-in inputs must DISCRIMINATE (GDN.md, 'Stand-in inputs').

Eight known-wrong GDN recurrences must fail the official correctness check (INCORRECT_NUMERICAL on
`output` or `new_state`) against the definition's own reference on every selected stand-in workload,
while the correct float64 recurrence, cast to the output dtypes, must pass on all of them.

Run as a script (`.venv/bin/python tests/test_mutations.py`) to print the per-variant table.
"""
import functools
import math
import sys
from pathlib import Path

import pytest
import torch

if __name__ == "__main__":  # script mode: make the repo importable like conftest.py does
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.eval.correctness import Tolerance, check_output, merge_max  # noqa: E402
from harness.data.dataset import Dataset  # noqa: E402
from harness.eval.inputs import load_blobs, materialize  # noqa: E402
from harness.eval.reference import load_reference, run_reference  # noqa: E402
from harness.data.trace import Status  # noqa: E402
from reference.gdn_recurrent import gates, recurrent_decode, recurrent_packed, resolve_scale  # noqa: E402

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
DEFINITIONS = {"decode": DECODE, "prefill": PREFILL}
PREFILL_SMALLEST = 8


# ---------------------------------------------------------------------------------------------
# Workloads and the official expectations

def select_workloads(defn, workloads):
    """decode: the first workload of each batch size; prefill: the 8 smallest by total_seq_len, plus
    the two smallest with num_seqs == 2 and the smallest with num_seqs >= 3 (sequence boundaries)."""
    if defn.name == DECODE:
        by_b = {}
        for w in workloads:
            by_b.setdefault(w.axes["batch_size"], w)
        return [by_b[b] for b in sorted(by_b)]
    ordered = sorted(workloads, key=lambda w: (w.axes["total_seq_len"], w.uuid))
    chosen = ordered[:PREFILL_SMALLEST]
    chosen += [w for w in ordered if w.axes["num_seqs"] == 2][:2]
    chosen += [w for w in ordered if w.axes["num_seqs"] >= 3][:1]
    return chosen


@functools.lru_cache(maxsize=None)
def cases(kind):
    """[(workload, inputs in definition order, official reference outputs)] for the selection."""
    ds = Dataset()
    defn = ds.definition(DEFINITIONS[kind])
    run = load_reference(defn)
    out = []
    for w in select_workloads(defn, ds.workloads(defn)):
        inputs = materialize(defn, w, load_blobs(ds, defn, w), "cpu", trial=0, seed=0)
        expected = run_reference(run, defn, [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        out.append((w, inputs, expected))
    return defn, out


def verdict(defn, outs, expected):
    """The official check over both outputs: first failing status (or None) and per-output errors."""
    status, errs = None, {}
    for name, o, e in zip(defn.outputs, outs, expected):
        chk = check_output(name, o, e, Tolerance())
        errs[name] = chk
        if status is None and chk.status is not None:
            status = chk.status
    return status, errs


# ---------------------------------------------------------------------------------------------
# One float64 recurrence with switches for the mutations; vectorised over sequences and heads.

def packed(kind, inputs):
    """Decode inputs [B, 1, ...] as B one-token packed sequences; prefill as given."""
    if kind == "decode":
        q, k, v, state, A_log, a, dt_bias, b, scale = inputs
        cu = torch.arange(q.shape[0] + 1, dtype=torch.int64)
        return dict(q=q[:, 0], k=k[:, 0], v=v[:, 0], state=state, A_log=A_log, a=a[:, 0],
                    dt_bias=dt_bias, b=b[:, 0], cu=cu, scale=scale)
    q, k, v, state, A_log, a, dt_bias, b, cu, scale = inputs
    return dict(q=q, k=k, v=v, state=state, A_log=A_log, a=a, dt_bias=dt_bias, b=b, cu=cu, scale=scale)


def recurrence(kind, inputs, *, gate=None, beta=None, scale=None, head_of=None, state_as_kv=False,
               out_before_update=False, skip=None):
    """Returns (output bf16, new_state fp32) in the definition's shapes.
    gate/beta: functions of the true (g, beta) [T, HV] giving the ones used; head_of: q/k head per
    v-head; state_as_kv: read (and write back) the stored [V, K] state as if it were [K, V];
    out_before_update: o_t from the decayed old state only; skip: token mask treated as absent."""
    P = packed(kind, inputs)
    T, HK, K = P["q"].shape
    HV, V = P["v"].shape[1:]
    g, bt = gates(P["A_log"], P["a"], P["dt_bias"], P["b"])
    if gate is not None:
        g = gate(g)
    if beta is not None:
        bt = beta(bt)
    sc = resolve_scale(P["scale"], K) if scale is None else scale
    heads = torch.arange(HV) // (HV // HK) if head_of is None else head_of(torch.arange(HV))
    q, k, v = P["q"].double()[:, heads], P["k"].double()[:, heads], P["v"].double()
    S = P["state"].double().clone()                                    # [N, HV, V, K]
    if state_as_kv:
        S = S.transpose(-1, -2).clone()
    starts, ends = P["cu"][:-1], P["cu"][1:]
    out = torch.zeros(T, HV, V, dtype=torch.float64)
    for i in range(int((ends - starts).max())):                        # i-th token of every sequence
        seqs = torch.nonzero(starts + i < ends).flatten()
        t = starts[seqs] + i
        if skip is not None:
            keep = ~skip[t]
            seqs, t = seqs[keep], t[keep]
        Sd = g[t, :, None, None] * S[seqs]                            # decay
        v_new = bt[t, :, None] * (v[t] - torch.einsum("nhvk,nhk->nhv", Sd, k[t]))
        Sn = Sd + v_new[..., None] * k[t][:, :, None, :]              # rank-1 update
        out[t] = sc * torch.einsum("nhvk,nhk->nhv", Sd if out_before_update else Sn, q[t])
        S[seqs] = Sn
    if state_as_kv:
        S = S.transpose(-1, -2)
    o = out.to(torch.bfloat16)
    return (o[:, None] if kind == "decode" else o), S.float().contiguous()


def _boundary_tokens(kind, inputs):
    """Variant 8's dropped tokens: prefill, the first token of every sequence after the first;
    decode, batch element 0's token."""
    P = packed(kind, inputs)
    T = P["q"].shape[0]
    skip = torch.zeros(T, dtype=torch.bool)
    if kind == "decode":
        skip[0] = True
    else:
        skip[P["cu"][1:-1]] = True
    return skip


VARIANTS = {
    "log_gate": lambda kind, x: recurrence(kind, x, gate=torch.log),                   # (1) log g for g
    "no_beta": lambda kind, x: recurrence(kind, x, beta=torch.ones_like),              # (2) beta = 1
    "no_decay": lambda kind, x: recurrence(kind, x, gate=torch.ones_like),             # (3) g = 1
    "state_transposed": lambda kind, x: recurrence(kind, x, state_as_kv=True),         # (4) [K,V] read
    "output_from_old_state": lambda kind, x: recurrence(kind, x, out_before_update=True),  # (5)
    "heads_mod4": lambda kind, x: recurrence(kind, x, head_of=lambda h: h % 4),        # (6) h % 4
    "scale_ignored": lambda kind, x: recurrence(kind, x, scale=1.0),                   # (7) scale = 1
    "boundary_token_dropped": lambda kind, x: recurrence(kind, x, skip=_boundary_tokens(kind, x)),  # (8)
}


def correct_fp64(kind, inputs):
    """The independent float64 token recurrence (reference/gdn_recurrent.py) cast to the output dtypes."""
    if kind == "decode":
        o, s = recurrent_decode(*inputs)
    else:
        o, s = recurrent_packed(*inputs)
    return o.to(torch.bfloat16), s.float()


def has_boundary(kind, workload):
    """Variant 8 changes nothing where there is no boundary to drop a token at (prefill, one sequence)."""
    return kind == "decode" or workload.axes["num_seqs"] >= 2


# ---------------------------------------------------------------------------------------------
# Tests

@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors here are ~1 MB: one thread is as fast, and far faster when other processes share
    the (2-core) CPU, where torch's spinning worker threads stall each other."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("kind", list(DEFINITIONS))
def test_selection(kind):
    _, cs = cases(kind)
    ws = [w for w, _, _ in cs]
    if kind == "decode":
        assert {1, 4, 8, 16} <= {w.axes["batch_size"] for w in ws}
    else:
        assert len(ws) >= PREFILL_SMALLEST + 1
        assert any(w.axes["num_seqs"] >= 3 for w in ws)


@pytest.mark.parametrize("kind", list(DEFINITIONS))
def test_correct_fp64_passes(kind):
    defn, cs = cases(kind)
    for w, inputs, expected in cs:
        status, errs = verdict(defn, correct_fp64(kind, inputs), expected)
        assert status is None, (w.uuid, {n: c.message for n, c in errs.items()})


@pytest.mark.parametrize("kind", list(DEFINITIONS))
def test_unmutated_core_passes(kind):
    """The switchable recurrence with no switch thrown passes too, so each variant's failure is the
    mutation's doing; and it equals the independent float64 recurrence bit for bit after the casts."""
    defn, cs = cases(kind)
    for w, inputs, expected in cs:
        outs = recurrence(kind, inputs)
        status, errs = verdict(defn, outs, expected)
        assert status is None, (w.uuid, {n: c.message for n, c in errs.items()})
        ref = correct_fp64(kind, inputs)
        assert torch.equal(outs[0].float(), ref[0].float())
        assert (outs[1] - ref[1]).abs().max().item() < 1e-5


@pytest.mark.parametrize("kind", list(DEFINITIONS))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_fails(variant, kind):
    defn, cs = cases(kind)
    passed = []
    for w, inputs, expected in cs:
        outs = VARIANTS[variant](kind, inputs)
        if variant == "boundary_token_dropped" and not has_boundary(kind, w):
            # No boundary: the variant is the correct recurrence (checked, not assumed); it cannot fail.
            ref = recurrence(kind, inputs)
            assert torch.equal(outs[0].float(), ref[0].float()) and torch.equal(outs[1], ref[1])
            continue
        status, errs = verdict(defn, outs, expected)
        if status != Status.INCORRECT_NUMERICAL:
            passed.append((w.uuid, dict(w.axes), status,
                           {n: (c.max_abs, c.max_rel, c.matched_ratio) for n, c in errs.items()}))
    assert not passed, f"{variant} is not caught on: {passed}"
    if variant == "boundary_token_dropped" and kind == "prefill":
        assert sum(has_boundary(kind, w) for w, _, _ in cs) >= 3     # it was tested somewhere


# ---------------------------------------------------------------------------------------------
# The table

def e_numel(expected, defn, name):
    return expected[list(defn.outputs).index(name)].numel()


def mutation_table():
    """definition, variant -> status counts over the selected workloads, the max abs/rel error of each
    output, and the fewest failing elements seen on any one workload (the margin of discrimination)."""
    rows = []
    for kind in DEFINITIONS:
        defn, cs = cases(kind)
        fns = {"correct_fp64 (must pass)": lambda x, kind=kind: correct_fp64(kind, x)}
        fns.update({n: (lambda x, f=f, kind=kind: f(kind, x)) for n, f in VARIANTS.items()})
        for name, fn in fns.items():
            counts, mx, fewest = {}, {o: [0.0, 0.0] for o in defn.outputs}, math.inf
            for w, inputs, expected in cs:
                status, errs = verdict(defn, fn(inputs), expected)
                label = status.name if status is not None else "PASSED"
                if status is None and name == "boundary_token_dropped" and not has_boundary(kind, w):
                    label = "PASSED (num_seqs=1: no boundary, identical to correct)"
                    counts[label] = counts.get(label, 0) + 1
                    continue                                           # not a discrimination margin
                counts[label] = counts.get(label, 0) + 1
                nfail = 0
                for o, c in errs.items():
                    mx[o][0], mx[o][1] = merge_max(mx[o][0], c.max_abs), merge_max(mx[o][1], c.max_rel)
                    nfail += round((1.0 - c.matched_ratio) * e_numel(expected, defn, o))
                fewest = min(fewest, nfail)
            rows.append((DEFINITIONS[kind], name, ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
                         *[f"{x:.3g}" for o in defn.outputs for x in mx[o]], str(fewest)))
    head = ("definition", "variant", "statuses", "output max abs", "output max rel",
            "new_state max abs", "new_state max rel", "fewest failing elems")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(c).ljust(wd) for c, wd in zip(r, widths)) + " |"  # noqa: E731
    print(line(head))
    print("|" + "|".join("-" * (wd + 2) for wd in widths) + "|")
    for r in rows:
        print(line(r))
    for kind in DEFINITIONS:
        _, cs = cases(kind)
        print(f"{DEFINITIONS[kind]}: {len(cs)} workloads: "
              + ", ".join(",".join(str(v) for v in w.axes.values()) for w, _, _ in cs))


if __name__ == "__main__":
    torch.set_num_threads(1)
    mutation_table()
