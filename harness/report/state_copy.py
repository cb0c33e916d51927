"""Solutions against the device copy of the state that `--state-copy` timed in the same run
(harness/eval/state_copy.py): per batch size / T bucket, each solution's mean latency over the copy's mean on the same
workloads."""
from pathlib import Path

import pandas as pd

from harness.data.dataset import extras_path
from harness.data.jsonio import read_jsonl
from harness.eval.state_copy import RECORD
from harness.report.compare import bucket_of, bucket_order
from harness.report.markdown import md_table


def load_copies(out_dirs, definition):
    """The state copy latencies the extras of out_dirs hold for `definition`: one row per (source, workload), the
    last recorded, with the GPU and timer it was timed on."""
    rows = []
    for out_dir in map(Path, out_dirs):
        path = extras_path(out_dir, definition.name)
        if path.exists():
            rows += [{"source": str(out_dir), "uuid": e["workload"], "copy_us": e["latency_ms"] * 1e3,
                      "copy_hardware": e["hardware"], "copy_timer": e["timer"]}
                     for _, e in read_jsonl(path, allow_partial_tail=True) if e.get("record") == RECORD]
    df = pd.DataFrame(rows, columns=["source", "uuid", "copy_us", "copy_hardware", "copy_timer"])
    return df.drop_duplicates(["source", "uuid"], keep="last")


def copy_ratios(rows, copies, order):
    """(the copy's mean us per bucket, one row; each solution's ratio per bucket, in `order`). `rows`: one per
    (solution, workload) with source, uuid, status, latency_us, hardware, timer and the workload's axes. A solution's
    ratio in a bucket is its mean latency over the workloads of it that PASSED and have a copy timed in the same
    folder, on the same GPU and timer, over the copy's mean on those workloads (1.05: 5 % slower than the copy)."""
    rows = rows.assign(bucket=rows.apply(bucket_of, axis=1))
    joined = rows.merge(copies, on=["source", "uuid"])
    joined = joined[(joined.copy_hardware == joined.hardware) & (joined.copy_timer == joined.timer)]
    buckets = bucket_order(joined.bucket)
    per_workload = joined.drop_duplicates(["source", "uuid"])
    means = pd.DataFrame([{"": "state copy (us)", **{b: per_workload.copy_us[per_workload.bucket == b].mean()
                                                    for b in buckets}}])
    passed = joined[joined.status == "PASSED"]
    ratios = []
    for solution in order:
        mine = passed[passed.solution == solution]
        ratios.append({"solution": solution, **{
            b: mine.latency_us[mine.bucket == b].mean() / mine.copy_us[mine.bucket == b].mean() for b in buckets}})
    return means, pd.DataFrame(ratios, columns=["solution", *buckets])


def copy_section(rows, copies, order):
    """Markdown lines: the copy's means and each solution's ratios; none when no copy was timed."""
    means, ratios = copy_ratios(rows, copies, order)
    if means.drop(columns="").isna().all(axis=None):
        return []
    return ["## Against a device copy of the state", "",
            "`new_state.copy_(state)` on each workload's inputs, timed in the same run with the same timer and "
            "settings (`--state-copy`): the bytes a kernel that writes a new state moves at least. Its mean per "
            "bucket:", "", md_table(means), "",
            "Each solution's mean latency over the workloads it passed, divided by the copy's mean on the same "
            "workloads (1.050: 5 % slower than the copy):", "", md_table(ratios), ""]
