"""Reports on runs with nothing to plot or nothing to pair, on hand-made output folders: a definition where every pair
failed (no latency at all: a log axis has nothing to show) still gets its report, comparison and leaderboard, each
plot saying so, and two runs with no pair in common give a clear error instead of a traceback."""
import json
import math

import matplotlib.pyplot
import numpy as np
import pytest

from harness.cli import main
from harness.data.dataset import Dataset, append_trace, trace_path
from harness.data.trace import Correctness, Environment, Evaluation, Performance, Status, Trace
from harness.data.workload import InputSpec, Workload
from harness.report.compare import write_comparison
from harness.report.leaderboard import write_leaderboard
from harness.report.plotting import loggable, on_log_axis
from harness.report.summary import write_report

DECODE = Dataset().definition("gdn_decode_qk4_v8_d128_k_last")
TIMER = "cupti (flashinfer.testing.bench_gpu_time_with_cupti, cold L2)"
W = [(f"{i}{i}{i}{i}{i}{i}{i}{i}-0000-4000-8000-000000000000", b) for i, b in enumerate([1, 4, 16], 1)]
BOOM = "Traceback (most recent call last):\n  File \"/sol/main.py\", line 3, in run\nRuntimeError: boom"


def _write(out, cells):
    """cells: {(author, solution): [per workload of W: a latency in us (PASSED) or a failing status]}."""
    n = 0
    for (author, solution), row in cells.items():
        for (uuid, batch), cell in zip(W, row):
            n += 1
            status, lat_ms = ("PASSED", cell / 1e3) if isinstance(cell, (int, float)) else (cell, None)
            libs = {"torch": "2.11.0+cu130", "harness": "0.1.0+abc1234", "inputs": "stand-in"}
            if lat_ms is not None:   # as the loop writes it: a failed pair was not timed
                libs["timer"] = TIMER
            ev = Evaluation(Status(status), Environment("NVIDIA H200", libs), f"2026-12-01T10:00:{n:02d}",
                            "" if lat_ms else BOOM,
                            Correctness(1e-3, 1e-4) if status in ("PASSED", "INCORRECT_NUMERICAL") else None,
                            Performance(lat_ms, 0.1, 0.1 / lat_ms) if lat_ms else None)
            wl = Workload(uuid, {"batch_size": batch}, {"scale": InputSpec("scalar", value=0.088)})
            append_trace(trace_path(out, author, DECODE.op_type, DECODE.name), Trace(DECODE.name, wl, solution, ev))
    return out


ALL_FAILED = {("alice", "broken"): ["RUNTIME_ERROR"] * 3, ("bob", "wrong"): ["INCORRECT_NUMERICAL"] * 3}


@pytest.fixture
def figures(monkeypatch):
    """The figures the report draws, kept (with their texts) as plt.close is called on them."""
    kept, close = [], matplotlib.pyplot.close

    def keep(fig=None):
        kept.append(fig)
        close(fig)
    monkeypatch.setattr(matplotlib.pyplot, "close", keep)
    return kept


def _texts(ax):
    return [" ".join(t.get_text().split()) for t in ax.texts]


def test_loggable_keeps_finite_values_above_zero():
    values = [2.0, math.nan, 0.0, -1.0, math.inf, None, 5]
    assert loggable(values).tolist() == [True, False, False, False, False, False, True]
    np.testing.assert_array_equal(on_log_axis(values), [2.0, math.nan, math.nan, math.nan, math.nan, math.nan, 5.0])
    assert on_log_axis([math.nan, 0.0, None]) is None and on_log_axis([]) is None


def test_report_is_written_when_every_pair_failed(tmp_path, figures):
    out = _write(tmp_path / "run", ALL_FAILED)
    report, summary, _, plots = write_report(out, [DECODE])
    md = (report / "report.md").read_text()
    assert f"## {DECODE.name}" in md and f"![{DECODE.name}]({DECODE.name}.png)" in md
    assert plots == [report / f"{DECODE.name}.png"] and plots[0].stat().st_size > 0
    assert dict(zip(summary.solution, summary.passed)) == {"broken": 0, "wrong": 0}
    (fig,) = figures
    latency, speedup = fig.axes
    assert not latency.lines and not speedup.lines and latency.get_yscale() == "linear"
    assert _texts(latency) == ["no latency to plot: no pair passed"]
    assert _texts(speedup) == ["no speedup to plot: no workload where both this solution and the FlashInfer "
                               "baseline passed, on a GPU timer"]
    assert latency.get_title() == DECODE.name and latency.get_xlabel() == "batch_size"


def test_report_plots_leave_out_a_solution_with_nothing_to_show(tmp_path, figures):
    cells = {**ALL_FAILED, ("baseline", "fi"): [10, 20, 40], ("carol", "half"): [5, "RUNTIME_ERROR", 10]}
    report, _, _, _ = write_report(_write(tmp_path / "run", cells), [DECODE])
    assert (report / "report.md").exists()
    (fig,) = figures
    latency, speedup = fig.axes
    assert latency.get_legend_handles_labels()[1] == ["fi", "half"] and latency.get_yscale() == "log"
    # half: speedups 10 / 5 = 2 at B=1 and 40 / 10 = 4 at B=16, a gap at B=4; fi against itself: 1 everywhere
    assert speedup.get_legend_handles_labels()[1] == ["fi", "half"] and speedup.get_yscale() == "log"
    ys = {line.get_label(): line.get_ydata().tolist() for line in speedup.lines[:2]}
    assert ys["fi"] == [1.0, 1.0, 1.0] and ys["half"][0::2] == [2.0, 4.0] and math.isnan(ys["half"][1])
    assert not latency.texts and not speedup.texts


def test_compare_is_written_when_every_pair_failed(tmp_path, figures):
    out = _write(tmp_path / "run", ALL_FAILED)
    folder, summary, buckets = write_comparison(out, DECODE, "broken")
    assert (folder / f"{DECODE.name}.md").exists() and (folder / f"{DECODE.name}.png").stat().st_size > 0
    assert list(buckets.bucket) == ["B=1", "B=4", "B=16"] and buckets["broken mean us"].isna().all()
    assert dict(zip(summary.solution, summary.passed)) == {"broken": 0, "wrong": 0}
    (fig,) = figures
    assert not fig.axes[0].patches and _texts(fig.axes[0]) == ["no latency to plot: no solution passed a workload"]
    md = (folder / f"{DECODE.name}.md").read_text()
    assert "**The base, broken, has no latency on 3 of its 3 workloads** (not PASSED)" in md  # why every ratio is '-'


def test_compare_leaves_out_a_solution_that_failed_everywhere(tmp_path, figures):
    out = _write(tmp_path / "run", {**ALL_FAILED, ("baseline", "fi"): [10, 20, 40]})
    write_comparison(out, DECODE, "broken")
    (fig,) = figures
    ax = fig.axes[0]
    assert ax.get_legend_handles_labels()[1] == ["fi"] and ax.get_yscale() == "log" and not ax.texts
    assert [p.get_height() for p in ax.patches] == [10.0, 20.0, 40.0]


def test_the_report_command_with_a_base_writes_both_when_every_pair_failed(tmp_path, capsys):
    out = _write(tmp_path / "run", ALL_FAILED)
    assert main(["report", str(out), "--out", str(out), "--definition", DECODE.name, "--base", "broken"]) == 0
    assert (out / "report" / "report.md").exists() and (out / "compare" / f"{DECODE.name}.md").exists()
    assert f"report: {out}/report/report.md" in capsys.readouterr().out


def test_leaderboard_is_written_when_every_pair_failed(tmp_path, figures):
    out = _write(tmp_path / "run", ALL_FAILED)
    tables = write_leaderboard(out, [DECODE], {DECODE.name: "broken"})
    assert list(tables[DECODE.name].passed) == [0, 0]
    for ext in ("md", "csv", "png"):
        assert (out / "leaderboard" / f"{DECODE.name}.{ext}").stat().st_size > 0
    (fig,) = figures
    assert not fig.axes[0].lines and _texts(fig.axes[0]) == ["no latency to plot: no entry passed a workload"]


def _run(folder, uuids, solution="sol"):
    """An output folder of one solution's traces on the given workloads, in the layout both tools write."""
    path = folder / "traces" / "me" / "gdn" / f"{DECODE.name}.jsonl"
    path.parent.mkdir(parents=True)
    ev = {"status": "PASSED", "environment": {"hardware": "NVIDIA H200", "libs": {}}, "timestamp": "2026-12-02T00:00",
          "log": "", "correctness": {"max_relative_error": 0.01, "max_absolute_error": 0.001},
          "performance": {"latency_ms": 0.01, "reference_latency_ms": 0.0, "speedup_factor": 0.0}}
    path.write_text("".join(json.dumps({"definition": DECODE.name, "solution": solution, "evaluation": ev,
                                        "workload": {"uuid": u, "axes": {"batch_size": 1}, "inputs": {}}}) + "\n"
                            for u in uuids))
    return str(folder)


@pytest.mark.parametrize("b_uuids,b_solution", [(["w3"], "sol"), (["w1", "w2"], "other")])
def test_agreement_of_runs_with_no_pair_in_common_is_a_clear_error(tmp_path, capsys, b_uuids, b_solution):
    a, b = _run(tmp_path / "a", ["w1", "w2"]), _run(tmp_path / "b", b_uuids, b_solution)
    assert main(["agreement", "--run", a, "--against", b, "--definition", DECODE.name,
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: agreement: no (solution, workload) pair in common between {a} (2 pair(s)) and {b} "
                   f"({len(b_uuids)} pair(s)): nothing to compare (same solution names and workload uuids are "
                   "needed)\n")
    assert not (tmp_path / "out").exists()
