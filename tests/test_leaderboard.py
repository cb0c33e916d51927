"""harness/report/leaderboard.py on a hand-made output folder: seven entries on four decode workloads, every figure
checked against values worked out by hand below."""
import math
import re

import pandas as pd
import pytest

from harness.data.dataset import Dataset, append_jsonl, append_trace, extras_path, trace_path
from harness.report.leaderboard import write_leaderboard
from harness.data.trace import Correctness, Environment, Evaluation, Performance, Status, Trace
from harness.data.workload import InputSpec, Workload

DEF = Dataset().definition("gdn_decode_qk4_v8_d128_k_last")
TIMER = "cupti (flashinfer.testing.bench_gpu_time_with_cupti, cold L2)"
LIBS = {"torch": "2.11.0+cu130", "harness": "0.1.0+abc1234", "inputs": "stand-in", "timer": TIMER}
# four workloads: two at B=1, one at B=4, one at B=16
WORKLOADS = [(f"{i}{i}{i}{i}{i}{i}{i}{i}-0000-4000-8000-000000000000", b) for i, b in enumerate([1, 1, 4, 16], 1)]
REF_US = 100.0

TRACEBACK = ("loading kernels\nTraceback (most recent call last):\n"
             '  File "/sol/main.py", line 12, in run\n    kernel[grid](q, k, v)\n'
             '  File "/sol/kernel.py", line 40, in kernel\n    raise ValueError("BLOCK_V=256 exceeds shared memory")\n'
             "ValueError: BLOCK_V=256 exceeds shared memory")
NUMERICAL = ("trial 0: output 'output': 37 of 4096 elements exceed atol=0.01 and rtol=0.01 "
             "(matched ratio 0.990967 < 1.0)")
TIMEOUT = "Evaluation timeout after 300 seconds for solution half-decode"
MODIFIED = "inputs modified by the call: state"
SPREAD = ["timings spread widely: min 1.00 us, median 5.00 us, max 9.00 us",
          "timings spread widely: min 2.00 us, median 10.00 us, max 30.00 us"]
SYNC = ("host sync inside the call (it waited for GPU work queued before it: .item(), .cpu(), "
        "torch.cuda.synchronize()...); the official span timer charges the stall")
STILL = ("GPU work was still running when the call returned (outputs changed after the return: work on another "
         "stream with no dependency on the caller's stream?)")

# (solution, author, per workload: latency in us, or (status, log)), and each workload's warnings
ENTRIES = {
    "our-decode": ("gdn-harness", [2, 4, 10, 40]),
    "flashinfer-decode": ("baseline", [4, 4, 20, 80]),
    "fast-decode": ("speedy", [1, 2, 5, 20]),
    "warny-decode": ("noisy", [3, 5, 8, 50]),
    "flaky-decode": ("shaky", [1, ("RUNTIME_ERROR", TRACEBACK), ("INCORRECT_NUMERICAL", NUMERICAL), 50]),
    "half-decode": ("aaa-half", [3, *[("TIMEOUT", TIMEOUT)] * 3]),
    "short-decode": ("brief", [1, 1, 5, None]),   # no trace on the last workload (given up on, not reached)
}
WARNINGS = {"warny-decode": [[MODIFIED], [MODIFIED, SPREAD[0]], [SPREAD[1]], [SYNC, STILL]]}
OURS = {DEF.name: "our-decode"}
FACTS = {"fast-decode": "speedy/gdn-kernels@0123abcd"}


def _write_folder(out, entries=ENTRIES):
    n = 0
    for solution, (author, cells) in entries.items():
        for (uuid, batch), cell, warns in zip(WORKLOADS, cells, WARNINGS.get(solution, [[]] * 4)):
            if cell is None:
                continue
            status, log = (cell if isinstance(cell, tuple) else ("PASSED", ""))
            lat_ms = cell / 1e3 if status == "PASSED" else None
            log += "".join(f"\n[harness warning] {w}" for w in warns)  # as evaluate.make_trace writes it
            n += 1
            ev = Evaluation(Status(status), Environment("NVIDIA H200", dict(LIBS, solution_digest=f"d-{solution}")),
                            f"2026-12-01T10:00:{n:02d}.000000", log,
                            Correctness(1e-3, 1e-4) if status in ("PASSED", "INCORRECT_NUMERICAL") else None,
                            Performance(lat_ms, REF_US / 1e3, REF_US / 1e3 / lat_ms) if lat_ms else None)
            wl = Workload(uuid, {"batch_size": batch}, {"scale": InputSpec("scalar", value=0.088)})
            append_trace(trace_path(out, author, "gdn", DEF.name), Trace(DEF.name, wl, solution, ev))
            append_jsonl(extras_path(out, DEF.name), {
                "solution": solution, "author": author, "workload": uuid, "status": status, "latency_ms": lat_ms,
                "event_ms": None, "timer": TIMER, "reference_latency_ms": REF_US / 1e3, "reference_timing": "10/50/3",
                "inputs": "stand-in", "warnings": warns, "wall_s": 1.0})


# Worked out by hand from ENTRIES (baseline latencies 4, 4, 20, 80; ours 2, 4, 10, 40):
# solution: (passed, mean latency over PASSED, gated speedup, speedup over both-passed, win rate vs ours,
#            mean us at B=1, B=4, B=16)
NAN = math.nan
EXPECTED = {
    "fast-decode": (4, 7.0, 3.5, 3.5, 4 / 4, 1.5, 5.0, 20.0),        # speedups 4, 2, 4, 4
    "our-decode": (4, 14.0, 1.75, 1.75, NAN, 3.0, 10.0, 40.0),       # 2, 1, 2, 2
    "warny-decode": (4, 16.5, (4 / 3 + 0.8 + 2.5 + 1.6) / 4, (4 / 3 + 0.8 + 2.5 + 1.6) / 4, 1 / 4, 4.0, 8.0, 50.0),
    "flashinfer-decode": (4, 27.0, 1.0, 1.0, 0 / 4, 4.0, 20.0, 80.0),
    "short-decode": (3, 7 / 3, 0.0, 4.0, 3 / 4, 1.0, 5.0, NAN),      # all passed, but one workload untraced
    "flaky-decode": (2, 25.5, 0.0, (4 + 1.6) / 2, 1 / 4, 1.0, NAN, 50.0),  # 1 us beats our 2 us at w1
    "half-decode": (1, 3.0, 0.0, 4 / 3, 0 / 4, 3.0, NAN, NAN),
}


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    _write_folder(out)
    tables = write_leaderboard(out, [DEF], OURS, facts=FACTS)
    return out, tables[DEF.name], (out / "leaderboard" / f"{DEF.name}.md").read_text()


def test_table_figures_and_order(board):
    _, table, _ = board
    # gated first; the entries at 0 (failing or short of a trace) by their ungated speedup, 4 before 2.8 and 1.33
    assert list(table.solution) == list(EXPECTED) and list(table["rank"]) == [1, 2, 3, 4, 5, 6, 7]
    cols = ["passed", "mean_latency_us", "gated_speedup_vs_baseline", "speedup_vs_baseline", "win_rate_vs_ours",
            "B=1 mean us", "B=4 mean us", "B=16 mean us"]
    for row in table.itertuples():
        got = table.loc[row.Index, cols].astype(float).tolist()
        assert got == pytest.approx(list(EXPECTED[row.solution]), nan_ok=True), row.solution
    assert dict(zip(table.solution, table.workloads)) == {**{s: 4 for s in EXPECTED}, "short-decode": 3}
    assert set(table.of_workloads) == {4} and list(table.solution[table.ours]) == ["our-decode"]
    assert table.set_index("solution").author["flashinfer-decode"] == "baseline"


def test_without_baseline_traces_the_entries_that_passed_everything_rank_first(tmp_path):
    # no speedups at all (NaN): every workload passed first, by mean latency; then by workloads passed
    _write_folder(tmp_path, {k: v for k, v in ENTRIES.items() if k != "flashinfer-decode"})
    table = write_leaderboard(tmp_path, [DEF], OURS)[DEF.name]
    assert list(table.solution) == ["fast-decode", "our-decode", "warny-decode", "short-decode", "flaky-decode",
                                    "half-decode"]


def test_markdown_has_every_failure_reason_and_warning(board):
    _, _, md = board
    assert "**our-decode** (ours)" in md and "| 2/4 |" in md and "| 1/4 |" in md
    failures = md.split("## Failures")[1].split("## Harness warnings")[0]
    assert "### flaky-decode" in failures and "### half-decode" in failures and "### our-decode" not in failures
    for status, count in [("RUNTIME_ERROR", 1), ("INCORRECT_NUMERICAL", 1), ("TIMEOUT", 3)]:
        assert f"**{status}** on {count} of 4 workloads" in failures
    # the end of the traceback (where, what), not the noise before it
    assert 'File "/sol/kernel.py", line 40, in kernel' in failures
    assert "ValueError: BLOCK_V=256 exceeds shared memory" in failures and "loading kernels" not in failures
    assert NUMERICAL in failures and TIMEOUT in failures and "3 workload(s)" in failures
    warnings = md.split("## Harness warnings")[1].split("## Provenance per entry")[0]
    assert f"| warny-decode | 2/4 | {MODIFIED} |" in warnings
    assert re.search(r"\| warny-decode \| 2/4 \| timings spread widely: min [12]\.00 us", warnings)  # one kind
    assert f"| warny-decode | 1/4 | {SYNC} |" in warnings and f"| warny-decode | 1/4 | {STILL} |" in warnings
    assert len(re.findall(r"^\| warny-decode", warnings, re.M)) == 4
    assert "| fast-decode |" not in warnings


def test_provenance_and_files(board):
    out, table, md = board
    prov = md.split("## Provenance per entry")[1]
    assert "speedy/gdn-kernels@0123abcd" in prov and "0.1.0+abc1234" in prov
    assert "NVIDIA H200" in prov and TIMER in prov and "stand-in" in prov and "d-flaky-decode" in prov
    for ext in ("md", "csv", "png"):
        assert (out / "leaderboard" / f"{DEF.name}.{ext}").stat().st_size > 0
    csv = pd.read_csv(out / "leaderboard" / f"{DEF.name}.csv")
    assert list(csv.solution) == list(EXPECTED) and csv.provenance.str.contains("harness 0.1.0\\+abc1234").all()


def test_unknown_ours_is_refused(board):
    out, _, _ = board
    with pytest.raises(ValueError, match="not-there"):
        write_leaderboard(out, [DEF], {DEF.name: "not-there"})
