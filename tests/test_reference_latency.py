"""Reference latencies: a time budget leaves the rest unprofiled (and the report says so instead of
averaging a subset), and a resumed run takes the figures its traces already hold."""
import json
import math
import re
from pathlib import Path

import pytest

from harness.data.dataset import Dataset
from harness.eval.options import EvalOptions
from harness.eval.loop import evaluate
from harness.data.jsonio import DataError, read_jsonl
from harness.report.summary import write_report
from harness.eval.child import TimingConfig
from harness.data.solution import Solution
from harness.eval.timing import CPU_LABEL
from tests.toy import make_toy_root, toy_solution

BODY = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"


def _setup(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    definition = ds.definition("toy_axpy")
    return ds, definition, ds.workloads(definition)


def _opts(tmp_path, **kw):
    return EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), show_progress=False,
                       reference_cache=tmp_path / "ref.json", **kw)


def _ref_ms(results):
    return {r.workload.uuid: r.trace.evaluation.performance.reference_latency_ms for r in results}


def _as_if_on_gpu(out_dir):
    """Rewrite a CPU run's traces and extras as if a GPU timer had taken them (the report takes no speedup from a
    CPU run)."""
    for f in Path(out_dir).rglob("*.jsonl"):
        f.write_text(re.sub(r'"hardware": ?"CPU [^"]*"', '"hardware": "NVIDIA H200"',
                            f.read_text().replace(CPU_LABEL, "cupti (as on a GPU)")))


def test_budget_leaves_the_rest_unprofiled_and_the_report_says_so(tmp_path, capsys):
    ds, definition, workloads = _setup(tmp_path)
    sol = Solution.from_json(toy_solution("a", BODY), "a")
    results = evaluate(ds, definition, workloads, [sol], _opts(tmp_path, reference_budget_s=0.0))
    assert all(r.trace.evaluation.status.value == "PASSED" for r in results)
    assert set(_ref_ms(results).values()) == {0.0}
    assert "workloads have no reference latency" in capsys.readouterr().out
    out, summary, track, _ = write_report(tmp_path / "out", [definition])
    row = summary.iloc[0]
    assert row.reference_profiled == 0 and math.isnan(row.mean_speedup_vs_reference)
    assert math.isnan(track.iloc[0].track_score_vs_reference)
    text = (out / "report.md").read_text()
    # a CPU run (wall clock): its report says why no speedup is taken, rather than that references are missing
    assert "no speedup vs reference or baseline is taken" in text and "## Harness run time" in text
    # the same traces as a GPU timer had taken them: the references the budget left out are said to be missing
    _as_if_on_gpu(tmp_path / "out")
    out, *_ = write_report(tmp_path / "out", [definition])
    assert "Reference latency missing for some workloads" in (out / "report.md").read_text()
    from harness.report.rows import load_rows
    from harness.report.summary import run_time
    prep, pairs = run_time(load_rows([tmp_path / "out"], [definition]))
    assert prep.workloads.tolist() == [3] and prep.prepare_s.iloc[0] > 0
    assert pairs.pairs.tolist() == [3] and pairs.pairs_s.iloc[0] > 0


def test_resumed_run_takes_reference_latencies_from_its_traces(tmp_path):
    ds, definition, workloads = _setup(tmp_path)
    first = evaluate(ds, definition, workloads, [Solution.from_json(toy_solution("a", BODY), "a")], _opts(tmp_path))
    timed = _ref_ms(first)
    assert all(v > 0 for v in timed.values())
    (tmp_path / "ref.json").unlink()  # a fresh machine: the cache file is gone, the traces are not
    second = evaluate(ds, definition, workloads, [Solution.from_json(toy_solution("b", BODY), "b")],
                      _opts(tmp_path, resume=True, reference_budget_s=0.0))
    assert _ref_ms(second) == timed
    assert len(json.loads((tmp_path / "ref.json").read_text())) == len(workloads)


def test_payload_cache_reuses_reference_outputs_and_recomputes_what_changed(tmp_path):
    import torch

    ds, definition, workloads = _setup(tmp_path)
    sol = Solution.from_json(toy_solution("a", BODY), "a")
    cache = tmp_path / "payloads"
    first = evaluate(ds, definition, workloads, [sol], _opts(tmp_path, payload_cache=cache))
    assert [r.trace.evaluation.status.value for r in first] == ["PASSED"] * 3
    files = sorted(cache.glob("*.pt"))
    assert len(files) == len(workloads)
    # Poison the kept reference outputs of one workload: a second run must use them (and so fail there)
    victim = next(f for f in files if "w-blob" in f.name)
    payload = torch.load(victim, weights_only=False)
    payload["outputs"] = [[o + 100.0 for o in trial] for trial in payload["outputs"]]
    torch.save(payload, victim)
    damaged = next(f for f in files if "w-standin" in f.name)
    damaged.write_bytes(b"not a payload")  # a damaged entry is recomputed, not fatal
    second = evaluate(ds, definition, workloads, [sol], _opts(tmp_path, payload_cache=cache))
    assert {r.workload.uuid: r.trace.evaluation.status.value for r in second} == {
        "w-random": "PASSED", "w-blob": "INCORRECT_NUMERICAL", "w-standin": "PASSED"}
    # Another seed is another payload: recomputed, so correct again
    third = evaluate(ds, definition, workloads, [sol], _opts(tmp_path, payload_cache=cache, seed=1))
    assert [r.trace.evaluation.status.value for r in third] == ["PASSED"] * 3
    assert len(list(cache.glob("*.pt"))) == 2 * len(workloads)  # the seed also drives the fresh-input check


def test_parallel_preparation_makes_the_reference_outputs_before_the_loop(tmp_path):
    """Payloads made in preparer processes hold the reference outputs of their own inputs (checked here
    against x + alpha * y, not against the harness), a wrong solution still fails on them, and every pair
    records the time its workload took to prepare."""
    import torch

    from harness.data.dataset import extras_path

    ds, definition, workloads = _setup(tmp_path)
    cache = tmp_path / "payloads"
    good = Solution.from_json(toy_solution("a", BODY), "a")
    wrong = Solution.from_json(toy_solution("w", "def run(x, y, alpha, z):\n    z.copy_(x + y)\n"), "w")
    stats = {}
    results = evaluate(ds, definition, workloads, [good, wrong], _opts(tmp_path, payload_cache=cache, prepare_jobs=2),
                       stats)
    status = {(r.solution.name, r.workload.uuid): r.trace.evaluation.status.value for r in results}
    assert all(status[("a", w.uuid)] == "PASSED" for w in workloads)
    assert status[("w", "w-random")] == status[("w", "w-blob")] == "INCORRECT_NUMERICAL"  # alpha != 1 there
    entries = sorted(cache.glob("*.pt"))
    assert len(entries) == len(workloads)
    alphas = {"w-random": 0.5, "w-blob": 2.0, "w-standin": 1.0}
    for path in entries:
        uuid = next(u for u in alphas if f"-{u}-" in path.name)
        payload = torch.load(path, weights_only=False)
        for (x, y, alpha), (z,) in zip(payload["inputs"], payload["outputs"]):
            assert alpha == alphas[uuid]
            torch.testing.assert_close(z, x + alphas[uuid] * y)
    extras = [e for _, e in read_jsonl(extras_path(tmp_path / "out", definition.name))]
    assert len(extras) == 6 and all(e["parallel_prepare_s"] > 0 for e in extras)
    assert stats["parallel_prepare_s"] > 0 and stats["pairs"] == 6 and stats["prepare_jobs"] == 2


def test_report_lists_the_recorded_runs(tmp_path):
    from harness.data.dataset import append_jsonl
    from harness.report.summary import runs_table

    assert runs_table(tmp_path) is None
    append_jsonl(tmp_path / "runs.jsonl", {"definition": "d", "wall_s": 12.5, "pairs": 4, "parallel_prepare_s": 3.0})
    (row,) = runs_table(tmp_path).to_dict("records")
    assert row["definition"] == "d" and row["wall_s"] == 12.5 and row["pairs"] == 4
    assert math.isnan(row["reference_timing_s"])  # not recorded: shown as missing, not as zero


def test_a_resumed_run_times_references_a_budget_left_out_and_the_report_fills_them_in(tmp_path, capsys):
    """Every pair done, references missing: the next pass times only the references (no pair runs again),
    records them in the extras, and the report's speedup vs reference becomes defined."""
    import pandas as pd

    from harness.data.dataset import extras_path

    ds, definition, workloads = _setup(tmp_path)
    sol = Solution.from_json(toy_solution("a", BODY), "a")
    evaluate(ds, definition, workloads, [sol], _opts(tmp_path, reference_budget_s=0.0))
    starved = evaluate(ds, definition, workloads, [sol], _opts(tmp_path, resume=True, reference_budget_s=0.0))
    ep = extras_path(tmp_path / "out", definition.name)
    assert all(r.skipped for r in starved) and '"record"' not in ep.read_text()
    capsys.readouterr()
    second = evaluate(ds, definition, workloads, [sol], _opts(tmp_path, resume=True))
    assert all(r.skipped for r in second)  # no pair ran again
    assert capsys.readouterr().out.count("its pairs were done earlier") == len(workloads)  # progress shown
    records = [e for _, e in read_jsonl(ep) if e.get("record") == "reference"]
    assert sorted(e["workload"] for e in records) == sorted(w.uuid for w in workloads)
    assert all(e["reference_latency_ms"] > 0 for e in records)
    evaluate(ds, definition, workloads, [sol], _opts(tmp_path, resume=True))  # nothing left to time
    assert len([1 for _, e in read_jsonl(ep) if e.get("record") == "reference"]) == len(workloads)
    # as if timed on a GPU: the report shows no speedups for a CPU wall clock
    _as_if_on_gpu(tmp_path / "out")
    out, summary, _, _ = write_report(tmp_path / "out", [definition])
    row = summary.iloc[0]
    assert row.reference_profiled == 3 and math.isfinite(row.mean_speedup_vs_reference)
    per = pd.read_csv(out / "toy_axpy.csv")
    assert (per.reference_timing.str.endswith("(another pass)")).all()
    ratio = per.reference_us / per.latency_us
    assert ((per.speedup_vs_reference - ratio).abs() < 1e-9 * ratio).all()


def test_report_takes_a_reference_latency_from_another_solutions_pass_for_the_same_inputs(tmp_path):
    """A pass that did not time the reference (--no-profile-baseline, as the FLA peers ran) gets the figure
    another solution's pass timed for the same workload, GPU, timer and input bytes, labelled so; inputs
    made with another seed differ, so their traces stay without one."""
    import pandas as pd

    ds, definition, workloads = _setup(tmp_path)
    first = evaluate(ds, definition, workloads, [Solution.from_json(toy_solution("a", BODY), "a")], _opts(tmp_path))
    timed = _ref_ms(first)
    for name, seed in (("b", 0), ("c", 7)):
        evaluate(ds, definition, workloads, [Solution.from_json(toy_solution(name, BODY), name)],
                 _opts(tmp_path, resume=True, profile_baseline=False, seed=seed))
    out, summary, _, _ = write_report(tmp_path / "out", [definition])
    per = pd.read_csv(out / "toy_axpy.csv").set_index(["solution", "uuid"])
    for w in workloads:
        b = per.loc[("b", w.uuid)]
        assert abs(b.reference_us - timed[w.uuid] * 1e3) < 1e-6 * b.reference_us
        assert b.reference_timing.endswith("(from a's pass)")
    digest = {(s, u): json.loads(libs)["input_digest"] for (s, u), libs in per.libs.items()}
    same = {w.uuid for w in workloads if digest[("c", w.uuid)] == digest[("a", w.uuid)]}  # blob inputs only
    assert 0 < len(same) < len(workloads)
    for w in workloads:
        assert math.isnan(per.loc[("c", w.uuid)].reference_us) == (w.uuid not in same)
    rows = summary.set_index("solution")
    assert rows.loc["b"].reference_profiled == len(workloads) and rows.loc["c"].reference_profiled == len(same)


@pytest.mark.parametrize("text, error", [('{"k1": 1.0, "k2"', "not valid JSON"), ("[1.0]", "expected an object")])
def test_a_damaged_cache_is_refused_and_left_as_it_is(tmp_path, text, error):
    """A cache that does not parse is not taken as empty and overwritten: its timings took GPU minutes."""
    ds, definition, workloads = _setup(tmp_path)
    (tmp_path / "ref.json").write_text(text)
    with pytest.raises(DataError, match=f"ref.json: {error}.*move it aside"):
        evaluate(ds, definition, workloads, [Solution.from_json(toy_solution("a", BODY), "a")], _opts(tmp_path))
    assert (tmp_path / "ref.json").read_text() == text
    assert not list((tmp_path / "out").rglob("*.jsonl"))       # refused before any pair ran
