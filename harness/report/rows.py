"""The traces of run folders as table rows: one per (definition, solution, workload), the last trace joined with the
harness extras (load_rows), or every trace (load_all_traces, for FlashInfer-Bench's own score rule)."""
import json
import math
from pathlib import Path

import pandas as pd

from harness.data.dataset import extras_path, read_traces
from harness.data.jsonio import read_jsonl
from harness.eval.timing import CPU_LABEL

BASELINE_AUTHOR = "baseline"


def wall_clock(df):
    """The rows of pairs run on the CPU: timed by its wall clock, or failed there (a failed pair names no timer)."""
    return (df.timer == CPU_LABEL) | df.hardware.str.startswith("CPU ")


def load_rows(out_dirs, definitions):
    """One row per (definition, solution, workload): the last trace written, joined with the harness extras."""
    rows = []
    for out_dir in map(Path, out_dirs):
        for definition in definitions:
            extras, later = {}, []
            ep = extras_path(out_dir, definition.name)
            if ep.exists():
                for _, e in read_jsonl(ep, allow_partial_tail=True):
                    if e.get("record") == "reference":  # a reference latency timed after the pairs' own pass
                        later.append(e)
                    elif "record" not in e:   # a pair's line (a state copy's is read by report/state_copy.py)
                        extras[(e["solution"], e["workload"])] = e
            traces = [(tp, tr) for tp in sorted((out_dir / "traces").glob(
                f"*/{definition.op_type}/{definition.name}.jsonl")) for tr in read_traces(tp) if tr.evaluation]
            known = _known_references(later, traces, extras)
            for tp, tr in traces:
                ev, e = tr.evaluation, extras.get((tr.solution, tr.workload.uuid), {})
                c, p = ev.correctness, ev.performance
                ref_ms, ref_timing = (p.reference_latency_ms if p else None), e.get("reference_timing", "?")
                if p and not ref_ms:   # its pass did not time the reference: one timed for the same inputs
                    late = next((x for x in known.get(tr.workload.uuid, []) if x["timer"] == e.get("timer")
                                 and x["input_digest"] == ev.environment.libs.get("input_digest")
                                 and x["hardware"] == ev.environment.hardware), None)
                    if late:
                        ref_ms = late["reference_latency_ms"]
                        ref_timing = f"{late['reference_timing']} ({late['source']})"
                rows.append({
                    "definition": definition.name, "solution": tr.solution, "author": tp.parent.parent.name,
                    "uuid": tr.workload.uuid, **{f"axis_{k}": v for k, v in tr.workload.axes.items()},
                    "status": ev.status.value,
                    "latency_us": p.latency_ms * 1e3 if p else math.nan,
                    "reference_us": ref_ms * 1e3 if ref_ms else math.nan,
                    "speedup_vs_reference": (p.speedup_factor if p.speedup_factor else ref_ms / p.latency_ms)
                    if p and ref_ms and p.latency_ms else math.nan,
                    "event_us": e["event_ms"] * 1e3 if e.get("event_ms") is not None else math.nan,
                    "max_abs_error": c.max_absolute_error if c else math.nan,
                    "max_rel_error": c.max_relative_error if c else math.nan,
                    "timer": e.get("timer") or ev.environment.libs.get("timer", "?"), "run": e.get("run"),
                    "reference_timing": ref_timing,
                    "inputs": ev.environment.libs.get("inputs", "?"),
                    "hardware": ev.environment.hardware, "timestamp": ev.timestamp,
                    "libs": json.dumps(ev.environment.libs, sort_keys=True), "source": str(out_dir),
                    "warnings": "; ".join(e.get("warnings", [])),
                    # for the leaderboard; not written to the CSVs (a log can hold megabytes)
                    "warning_list": list(e.get("warnings", [])), "log": ev.log,
                    **{k: e.get(k) if e.get(k) is not None else math.nan
                       for k in ("wall_s", "prepare_s", "reference_s", "parallel_prepare_s")},
                })
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df = df.drop_duplicates(["source", "definition", "solution", "uuid"], keep="last")
    # The same solution from several runs (machines) stays apart, labelled by its run folder.
    multi = df.groupby(["definition", "solution"]).source.transform("nunique") > 1
    df.loc[multi, "solution"] = df.solution[multi] + " [" + df.source[multi].map(lambda s: Path(s).name) + "]"
    df["divergence"] = df["event_us"] / df["latency_us"]
    base = df[df.author == BASELINE_AUTHOR][["definition", "uuid", "latency_us"]].rename(
        columns={"latency_us": "baseline_us"})
    df = df.merge(base, on=["definition", "uuid"], how="left")
    df["speedup_vs_baseline"] = df["baseline_us"] / df["latency_us"]
    # a CPU run checks correctness: its speedups are no official figure
    df.loc[wall_clock(df), ["speedup_vs_reference", "speedup_vs_baseline"]] = math.nan
    return df


def _known_references(later, traces, extras):
    """Reference latencies per workload uuid, for traces whose own pass did not time one: the extras' records
    of other passes first (timed after the pairs, or kept from an earlier pass), then those the other solutions'
    traces hold (a reference latency belongs to the workload and its inputs, not to a solution). Each says where
    it came from."""
    known = {}
    for e in later:
        if e.get("reference_latency_ms"):
            known.setdefault(e["workload"], []).append(dict(e, source="another pass"))
    for _, tr in traces:
        p, e = tr.evaluation.performance, extras.get((tr.solution, tr.workload.uuid), {})
        if p and p.reference_latency_ms:
            known.setdefault(tr.workload.uuid, []).append({
                "reference_latency_ms": p.reference_latency_ms, "timer": e.get("timer"),
                "reference_timing": e.get("reference_timing", "?"), "hardware": tr.evaluation.environment.hardware,
                "input_digest": tr.evaluation.environment.libs.get("input_digest"),
                "source": f"from {tr.solution}'s pass"})
    return known


def load_all_traces(out_dirs, definitions):
    """Every trace with an evaluation, earlier ones included (load_rows keeps only the last per pair): one row
    each, with the labels load_rows gives (a solution found in several folders is 'name [folder]'). The timer
    is the trace's environment.libs timer ('?' where it has none, e.g. a failed pair)."""
    rows = []
    for out_dir in map(Path, out_dirs):
        for definition in definitions:
            for tp in sorted((out_dir / "traces").glob(f"*/{definition.op_type}/{definition.name}.jsonl")):
                for tr in read_traces(tp):
                    ev = tr.evaluation
                    if not ev:
                        continue
                    p = ev.performance
                    rows.append({"source": str(out_dir), "definition": definition.name, "solution": tr.solution,
                                 "author": tp.parent.parent.name, "uuid": tr.workload.uuid,
                                 "status": ev.status.value,
                                 "latency_us": p.latency_ms * 1e3 if p and p.latency_ms is not None else math.nan,
                                 "timer": ev.environment.libs.get("timer", "?")})
    df = pd.DataFrame(rows, columns=["source", "definition", "solution", "author", "uuid", "status", "latency_us",
                                     "timer"])
    if df.empty:
        return df
    multi = df.groupby(["definition", "solution"]).source.transform("nunique") > 1
    df.loc[multi, "solution"] = df.solution[multi] + " [" + df.source[multi].map(lambda s: Path(s).name) + "]"
    return df
