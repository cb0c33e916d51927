"""The official score (FIB's TraceSet.get_solution_score / get_author_score and the contest's GDN track formula)
beside the harness's own figures, on hand-made output folders where the two rules differ. Every figure is worked
out by hand in the comments."""
import math

import pandas as pd
import pytest

from harness.data.dataset import Dataset, append_trace, trace_path
from harness.data.trace import Correctness, Environment, Evaluation, Performance, Status, Trace
from harness.data.workload import InputSpec, Workload
from harness.eval.timing import CPU_LABEL
from harness.report.official_score import OFFICIAL_SENTENCE, official_scores
from harness.report.rows import load_all_traces, load_rows
from harness.report.summary import summarize, track_scores, write_report

DS = Dataset()
DECODE = DS.definition("gdn_decode_qk4_v8_d128_k_last")
PREFILL = DS.definition("gdn_prefill_qk4_v8_d128_k_last")
TIMER = "cupti (flashinfer.testing.bench_gpu_time_with_cupti, cold L2)"
W = {f"w{i}": f"{i}{i}{i}{i}{i}{i}{i}{i}-0000-4000-8000-000000000000" for i in range(1, 5)}
P = {f"p{i}": f"{i}{i}{i}{i}{i}{i}{i}{i}-1111-4000-8000-000000000000" for i in range(1, 3)}
AXES = {**{u: {"batch_size": b} for u, b in zip(W.values(), [1, 4, 16, 64])},
        **{u: {"total_seq_len": t} for u, t in zip(P.values(), [128, 1024])}}
RT = ("RUNTIME_ERROR", None)
NUM = ("INCORRECT_NUMERICAL", None)
TO = ("TIMEOUT", None)

# (definition, author, solution, workload, cell) in the order written: a cell is a latency in us (PASSED) or a
# failing status. load_rows keeps the last trace per pair; the official rule reads them all.
TRACES = [
    # decode baseline: passes w1-w3 and fails w4, so w4 counts for no one
    (DECODE, "baseline", "fi-decode", "w1", 10), (DECODE, "baseline", "fi-decode", "w2", 20),
    (DECODE, "baseline", "fi-decode", "w3", 40), (DECODE, "baseline", "fi-decode", "w4", RT),
    # an earlier failure, then a PASSED trace on w1: the harness sees all pass, the official rule scores 0
    (DECODE, "alice", "redo", "w1", RT), (DECODE, "alice", "redo", "w1", 5), (DECODE, "alice", "redo", "w2", 10),
    (DECODE, "alice", "redo", "w3", 20), (DECODE, "alice", "redo", "w4", 1),
    # alice's second decode solution, all passed once: her official best
    (DECODE, "alice", "alice-ok", "w1", 20), (DECODE, "alice", "alice-ok", "w2", 20),
    (DECODE, "alice", "alice-ok", "w3", 20), (DECODE, "alice", "alice-ok", "w4", 1),
    # two PASSED traces on w1 (4 us, then 5 us): official takes 4, the harness the last, 5
    (DECODE, "bob", "twice", "w1", 4), (DECODE, "bob", "twice", "w1", 5), (DECODE, "bob", "twice", "w2", 10),
    (DECODE, "bob", "twice", "w3", 40), (DECODE, "bob", "twice", "w4", 1),
    # bob's slower second decode solution
    (DECODE, "bob", "bob-slow", "w1", 20), (DECODE, "bob", "bob-slow", "w2", 40),
    (DECODE, "bob", "bob-slow", "w3", 80), (DECODE, "bob", "bob-slow", "w4", 1),
    # fails only where the baseline failed: 0 under both rules; the harness's win rate is not gated
    (DECODE, "carol", "carol", "w1", 5), (DECODE, "carol", "carol", "w2", 20), (DECODE, "carol", "carol", "w3", 40),
    (DECODE, "carol", "carol", "w4", NUM),
    # prefill baseline: p1 passed at 100 then at 120 (last); p2 passed at 200, then timed out (last)
    (PREFILL, "baseline", "fi-prefill", "p1", 100), (PREFILL, "baseline", "fi-prefill", "p1", 120),
    (PREFILL, "baseline", "fi-prefill", "p2", 200), (PREFILL, "baseline", "fi-prefill", "p2", TO),
    (PREFILL, "bob", "bob-p", "p1", 50), (PREFILL, "bob", "bob-p", "p2", 50),
]


def _write(out, traces, timer=TIMER, hardware="NVIDIA H200"):
    for n, (definition, author, solution, w, cell) in enumerate(traces):
        status, lat_us = (cell[0], None) if isinstance(cell, tuple) else ("PASSED", cell)
        uuid = {**W, **P}[w]
        lat_ms = lat_us / 1e3 if lat_us is not None else None
        libs = {"torch": "2.11.0+cu130", "harness": "0.1.0+abc1234", "inputs": "stand-in"}
        if lat_ms is not None:   # as the loop writes it: a failed pair was not timed
            libs["timer"] = timer
        ev = Evaluation(Status(status), Environment(hardware, libs), f"2026-12-01T10:{n // 60:02d}:{n % 60:02d}",
                        "", Correctness(1e-3, 1e-4) if status in ("PASSED", "INCORRECT_NUMERICAL") else None,
                        Performance(lat_ms, 0.1, 0.1 / lat_ms) if lat_ms else None)
        wl = Workload(uuid, AXES[uuid], {"scale": InputSpec("scalar", value=0.088)})
        append_trace(trace_path(out, author, definition.op_type, definition.name),
                     Trace(definition.name, wl, solution, ev))


# Worked out by hand. Harness (last trace per pair; baseline latencies decode 10, 20, 40, prefill p1 120, p2
# none): mean speedup vs baseline (gated), win rate (ungated). Official (best PASSED of all traces; baseline
# decode 10, 20, 40, prefill 100, 200): score, win rate, workloads counted.
HARNESS = {
    "redo": (2.0, 1.0),                    # 10/5, 20/10, 40/20
    "alice-ok": ((0.5 + 1 + 2) / 3, 1 / 3),
    "twice": ((2 + 2 + 1) / 3, 2 / 3),     # last w1 = 5 us; 40 vs 40 is no win
    "bob-slow": (0.5, 0.0),
    "carol": (0.0, 1 / 3),                 # w4 failed; 5 < 10 on w1
    "bob-p": (2.4, 1.0),                   # 120/50 on p1; p2's baseline last failed
}
OFFICIAL = {
    "redo": (0.0, 0.0, 3),                 # the earlier RUNTIME_ERROR on w1
    "alice-ok": ((0.5 + 1 + 2) / 3, 1 / 3, 3),
    "twice": ((2.5 + 2 + 1) / 3, 2 / 3, 3),  # w1 best = 4 us: 10/4
    "bob-slow": (0.5, 0.0, 3),
    "carol": (0.0, 0.0, 3),                # a failure where the baseline failed still gives 0
    "bob-p": ((100 / 50 + 200 / 50) / 2, 1.0, 2),  # the baseline passed p2 once: it counts
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    _write(out, TRACES)
    return out


@pytest.fixture(scope="module")
def tables(folder):
    df = load_rows([folder], [DECODE, PREFILL])
    summary = summarize(df, load_all_traces([folder], [DECODE, PREFILL]))
    return summary.set_index("solution"), track_scores(summary).set_index("author")


def test_load_all_traces_keeps_earlier_traces(folder):
    every = load_all_traces([folder], [DECODE, PREFILL])
    assert len(every) == len(TRACES)
    assert len(load_rows([folder], [DECODE, PREFILL])) == len(TRACES) - 4  # redo w1, twice w1, fi-prefill p1 p2
    twice_w1 = every[(every.solution == "twice") & (every.uuid == W["w1"])]
    assert twice_w1.latency_us.tolist() == pytest.approx([4, 5])


def test_harness_figures_are_unchanged(tables):
    summary, _ = tables
    for solution, (speedup, win) in HARNESS.items():
        got = summary.loc[solution, ["mean_speedup_vs_baseline", "win_rate_vs_baseline"]].astype(float).tolist()
        assert got == pytest.approx([speedup, win]), solution
    assert summary.loc["redo", "all_pass"] and not summary.loc["carol", "all_pass"]


def test_official_figures(tables):
    summary, _ = tables
    for solution, (score, win, workloads) in OFFICIAL.items():
        got = summary.loc[solution, ["official_score_vs_baseline", "official_win_rate_vs_baseline",
                                     "official_workloads"]].astype(float).tolist()
        assert got == pytest.approx([score, win, workloads]), solution
    assert summary.loc["redo", "official_note"] == "0: 1 of 5 traces not PASSED"
    assert summary.loc["twice", "traces"] == 5 and summary.loc["twice", "official_note"] == ""
    for base in ("fi-decode", "fi-prefill"):   # FIB does not score the baseline
        assert math.isnan(summary.loc[base, "official_score_vs_baseline"])
        assert summary.loc[base, "official_note"] == "not scored: the baseline"


def test_track_scores(tables):
    _, track = tables
    # harness: best per definition of the gated means, averaged over the definitions the author has
    assert track.loc["alice", "track_score_vs_baseline"] == pytest.approx(2.0)          # redo
    assert track.loc["bob", "track_score_vs_baseline"] == pytest.approx((5 / 3 + 2.4) / 2)
    assert track.loc["carol", "track_score_vs_baseline"] == pytest.approx(0.0)
    # official: best official score per definition; track = avg * definitions / 2 (a missing kernel counts 0)
    alice = 7 / 6   # alice-ok, not redo
    assert track.loc["alice", ["official_score_vs_baseline", "official_win_rate_vs_baseline",
                               "official_definitions", "official_track_score"]].astype(float).tolist() == \
        pytest.approx([alice, 1 / 3, 1, alice * 1 / 2])
    bob_decode, bob_prefill = 5.5 / 3, 3.0   # twice (not bob-slow), bob-p
    assert track.loc["bob", ["official_score_vs_baseline", "official_win_rate_vs_baseline",
                             "official_definitions", "official_track_score"]].astype(float).tolist() == \
        pytest.approx([(bob_decode + bob_prefill) / 2, (2 / 3 + 1) / 2, 2, (bob_decode + bob_prefill) / 2])
    assert track.loc["carol", "official_track_score"] == 0.0 and track.loc["carol", "official_definitions"] == 1
    assert math.isnan(track.loc["baseline", "official_track_score"])
    assert track.loc["baseline", "official_definitions"] == 0


def test_report_shows_both(folder, tmp_path):
    out, summary, track, _ = write_report(tmp_path, [DECODE, PREFILL], sources=[folder])
    md = (out / "report.md").read_text()
    summary_part = md.split("## Summary")[1].split("## Track")[0]
    track_part = md.split("## Track")[1].split("\n## ")[0]
    assert "official_score_vs_baseline" in summary_part and OFFICIAL_SENTENCE in summary_part
    assert "official_track_score" in track_part and "track_score_vs_baseline" in track_part
    csv = pd.read_csv(out / "summary.csv").set_index("solution")
    assert csv.loc["twice", "official_score_vs_baseline"] == pytest.approx(5.5 / 3)
    assert track.set_index("author").loc["bob", "official_track_score"] == pytest.approx((5.5 / 3 + 3.0) / 2)


def test_cpu_timed_traces_give_no_official_figure(tmp_path):
    _write(tmp_path, [t for t in TRACES if t[0] is DECODE], timer=CPU_LABEL)
    out, summary, track, _ = write_report(tmp_path, [DECODE])
    summary = summary.set_index("solution")
    assert summary.official_score_vs_baseline.isna().all() and summary.official_win_rate_vs_baseline.isna().all()
    assert summary.loc["twice", "official_note"] == "undefined: CPU wall clock"
    assert track.official_track_score.isna().all()


def test_a_cpu_run_gives_no_speedup_to_a_solution_that_failed_everywhere(tmp_path):
    # a failed pair names no timer: only the hardware says it ran on the CPU (its gated speedup was 0.0 there,
    # beside NaN for the solutions that passed)
    _write(tmp_path, [(DECODE, "baseline", "fi-decode", "w1", 10), (DECODE, "bob", "twice", "w1", 5),
                      (DECODE, "carol", "carol", "w1", RT)], timer=CPU_LABEL, hardware="CPU x86_64")
    out, summary, _, _ = write_report(tmp_path, [DECODE])
    summary = summary.set_index("solution")
    assert summary.mean_speedup_vs_baseline.isna().all() and summary.win_rate_vs_baseline.isna().all()
    assert summary.mean_speedup_vs_reference.isna().all()
    assert "**CPU run: latencies are wall clock" in (out / "report.md").read_text()


def test_missing_baseline_and_no_comparable_workload(tmp_path):
    lone = tmp_path / "lone"
    _write(lone, [(DECODE, "bob", "twice", "w1", 4)])   # no baseline in the folder: FIB refuses
    rows = official_scores(load_all_traces([lone], [DECODE])).set_index("solution")
    assert rows.loc["twice", "official_note"].startswith("undefined: 0 solutions by 'baseline'")
    assert math.isnan(rows.loc["twice", "official_score_vs_baseline"])
    only_w4 = tmp_path / "w4"   # the baseline passed nowhere this solution ran: FIB gives no score (not 0)
    _write(only_w4, [(DECODE, "baseline", "fi-decode", "w4", RT), (DECODE, "bob", "twice", "w4", RT)])
    df = load_rows([only_w4], [DECODE])
    summary = summarize(df, load_all_traces([only_w4], [DECODE]))
    row = summary.set_index("solution").loc["twice"]
    assert row.official_note == "not scored: no workload the baseline passed" and row.official_workloads == 0
    assert math.isnan(track_scores(summary).set_index("author").loc["bob", "official_track_score"])


def test_each_folder_takes_its_own_baseline(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, [(DECODE, "baseline", "fi-decode", "w1", 10), (DECODE, "bob", "twice", "w1", 5)])
    _write(b, [(DECODE, "baseline", "fi-decode", "w1", 30), (DECODE, "bob", "twice", "w1", 5)])
    rows = official_scores(load_all_traces([a, b], [DECODE])).set_index("solution")
    assert rows.loc["twice [a]", "official_score_vs_baseline"] == pytest.approx(2.0)
    assert rows.loc["twice [b]", "official_score_vs_baseline"] == pytest.approx(6.0)


def test_summarize_without_traces_leaves_official_undefined(folder):
    summary = summarize(load_rows([folder], [DECODE]))
    assert summary.official_score_vs_baseline.isna().all()
    assert track_scores(summary).official_track_score.isna().all()
