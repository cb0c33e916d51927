"""Per-bucket ratios of a comparison on hand-made output folders where the solutions cover different workloads: a
ratio to the base compares the two means over the workloads both have a latency on only, a bucket with none in
common gives '-' (NaN), the table counts the workloads behind each figure, and all_pass counts only the workloads a
solution has. The leaderboard's bucket means say how many workloads they average where fewer than the bucket has."""
import math

import pandas as pd
import pytest

from harness.cli import main
from harness.data.dataset import Dataset, append_trace, trace_path
from harness.data.trace import Correctness, Environment, Evaluation, Performance, Status, Trace
from harness.data.workload import InputSpec, Workload
from harness.report.compare import write_comparison
from harness.report.leaderboard import write_leaderboard

DECODE = Dataset().definition("gdn_decode_qk4_v8_d128_k_last")
TIMER = "cupti (flashinfer.testing.bench_gpu_time_with_cupti, cold L2)"
# four workloads at B=1, two at B=4, one at B=16
W = [(f"{i}{i}{i}{i}{i}{i}{i}{i}-0000-4000-8000-000000000000", b) for i, b in enumerate([1, 1, 1, 1, 4, 4, 16])]
BOOM = "Traceback (most recent call last):\n  File \"/sol/main.py\", line 3, in run\nRuntimeError: boom"
# None: no trace for that workload; a number: PASSED at that many us; a string: that failing status
CELLS = {("me", "base"): [10, 20, 30, None, 5, None, 8],
         ("you", "other"): [None, 40, 90, 1000, None, 50, 4],
         ("them", "flaky"): [30, "RUNTIME_ERROR", 60, 7, 15, 25, 16]}


def _write(out, cells, stamp=0):
    n = stamp
    for (author, solution), row in cells.items():
        for (uuid, batch), cell in zip(W, row):
            if cell is None:
                continue
            n += 1
            status, lat_ms = ("PASSED", cell / 1e3) if isinstance(cell, (int, float)) else (cell, None)
            libs = {"torch": "2.11.0+cu130", "harness": "0.1.0+abc1234", "inputs": "stand-in"}
            if lat_ms is not None:
                libs["timer"] = TIMER
            stamp_at = f"2026-12-01T10:{n // 60:02d}:{n % 60:02d}"
            ev = Evaluation(Status(status), Environment("NVIDIA H200", libs), stamp_at, "" if lat_ms else BOOM,
                            Correctness(1e-3, 1e-4) if status in ("PASSED", "INCORRECT_NUMERICAL") else None,
                            Performance(lat_ms, 0.1, 0.1 / lat_ms) if lat_ms else None)
            wl = Workload(uuid, {"batch_size": batch}, {"scale": InputSpec("scalar", value=0.088)})
            append_trace(trace_path(out, author, DECODE.op_type, DECODE.name), Trace(DECODE.name, wl, solution, ev))
    return out


@pytest.fixture
def compared(tmp_path):
    out = _write(tmp_path / "run", CELLS)
    folder, summary, buckets = write_comparison(out, DECODE, "base")
    return folder, summary.set_index("solution"), buckets.set_index("bucket")


def test_bucket_ratio_is_over_the_common_workloads_only(compared):
    _, _, buckets = compared
    # B=1: base on w0-w2 (10, 20, 30), other on w1-w3 (40, 90, 1000); in common w1, w2: (40 + 90) / (20 + 30)
    # (the old figure, mean over each one's own workloads: (1130 / 3) / 20 = 18.83)
    assert buckets.at["B=1", "other / base"] == pytest.approx(2.6)
    assert buckets.at["B=16", "other / base"] == pytest.approx(0.5)
    # flaky failed w1: (30 + 60) / (10 + 30) at B=1 (not 31.67 / 20), 15 / 5 at B=4
    assert buckets.at["B=1", "flaky / base"] == pytest.approx(90 / 40)
    assert buckets.at["B=4", "flaky / base"] == pytest.approx(3.0)
    # each mean stays over the solution's own workloads
    assert buckets.at["B=1", "other mean us"] == pytest.approx(1130 / 3)
    assert buckets.at["B=1", "base mean us"] == pytest.approx(20.0)


def test_bucket_with_no_common_workload_is_nan_and_a_dash(compared):
    folder, _, buckets = compared
    # B=4: base on w4 only, other on w5 only (the old figure: 50 / 5 = 10)
    assert math.isnan(buckets.at["B=4", "other / base"])
    assert buckets.at["B=4", "other / base n"] == 0
    csv = pd.read_csv(folder / f"{DECODE.name}_buckets.csv").set_index("bucket")
    assert math.isnan(csv.at["B=4", "other / base"])
    row = next(x for x in (folder / f"{DECODE.name}.md").read_text().splitlines() if x.startswith("| B=4 |"))
    cells = row.strip("|").split("|")
    header = next(x for x in (folder / f"{DECODE.name}.md").read_text().splitlines()
                  if x.startswith("| bucket |")).strip("|").split("|")
    assert cells[[h.strip() for h in header].index("other / base")].strip() == "-"


def test_bucket_table_counts_the_workloads_behind_each_figure(compared, tmp_path):
    folder, _, buckets = compared
    assert list(buckets.workloads) == [4, 2, 1]
    assert list(buckets["base n"]) == [3, 1, 1] and list(buckets["other n"]) == [3, 1, 1]
    assert list(buckets["flaky n"]) == [3, 2, 1]           # failed w1 at B=1
    assert list(buckets["other / base n"]) == [2, 0, 1]   # fewer than other n: the base lacks w3 and w5
    assert list(buckets["flaky / base n"]) == [2, 1, 1]
    md = (folder / f"{DECODE.name}.md").read_text()
    assert "A column `<solution> n` counts the workloads behind" in md
    assert "the solution's mean latency over the base's mean on the same workloads" in md
    # no count column where every figure covers its whole bucket
    full = {("me", "base"): [10, 20, 30, 40, 5, 6, 8], ("you", "other"): [20, 20, 60, 40, 10, 12, 4]}
    folder, _, buckets = write_comparison(_write(tmp_path / "full", full), DECODE, "base")
    assert list(buckets.columns) == ["bucket", "workloads", "base mean us", "other mean us", "other / base"]
    assert list(buckets["other / base"]) == pytest.approx([140 / 100, 2.0, 0.5])
    assert "`<solution> n`" not in (folder / f"{DECODE.name}.md").read_text()


def test_all_pass_counts_only_the_workloads_a_solution_has(compared):
    _, summary, _ = compared
    assert summary.at["other", "all_pass"] and summary.at["base", "all_pass"]
    assert summary.at["other", "workloads"] == 5 and summary.at["other", "passed"] == 5
    assert not summary.at["flaky", "all_pass"] and summary.at["flaky", "passed"] == 6


def test_report_of_two_runs_with_no_workload_in_common(tmp_path, capsys):
    # the audit's case: one solution, run r1 on w0-w2 and r2 on w3 (all at B=1)
    r1 = _write(tmp_path / "r1", {("me", "X"): [10, 20, 30, None, None, None, None]})
    r2 = _write(tmp_path / "r2", {("me", "X"): [None, None, None, 40, None, None, None]}, stamp=10)
    out = tmp_path / "out"
    assert main(["report", str(r1), str(r2), "--out", str(out), "--definition", DECODE.name,
                 "--base", "X [r1]"]) == 0
    buckets = pd.read_csv(out / "compare" / f"{DECODE.name}_buckets.csv")
    assert list(buckets.bucket) == ["B=1"] and math.isnan(buckets.at[0, "X [r2] / X [r1]"])   # old: 40 / 20 = 2
    assert buckets.at[0, "X [r1] n"] == 3 and buckets.at[0, "X [r2] n"] == 1
    assert buckets.at[0, "X [r2] / X [r1] n"] == 0
    md = (out / "compare" / f"{DECODE.name}.md").read_text()
    summary = md.split("## Summary")[1].split("## By bucket")[0]
    assert "| X [r1] | True | 3 | 3 |" in summary and "| X [r2] | True | 1 | 1 |" in summary


def test_leaderboard_says_how_many_workloads_a_bucket_mean_averages(tmp_path):
    out = _write(tmp_path / "run", CELLS)
    write_leaderboard(out, [DECODE], {DECODE.name: "base"})
    md = (out / "leaderboard" / f"{DECODE.name}.md").read_text()
    note = next(x for x in md.splitlines() if x.startswith("Bucket means over fewer workloads"))
    assert "base (B=1 3/4, B=4 1/2)" in note and "other (B=1 3/4, B=4 1/2)" in note
    assert "flaky (B=1 3/4)" in note   # B=4 and B=16 cover their buckets
    # no note where every mean covers its bucket
    full = {("me", "base"): [10, 20, 30, 40, 5, 6, 8], ("you", "other"): [20, 20, 60, 40, 10, 12, 4]}
    out = _write(tmp_path / "full", full)
    write_leaderboard(out, [DECODE], {DECODE.name: "base"})
    assert "Bucket means over fewer" not in (out / "leaderboard" / f"{DECODE.name}.md").read_text()
