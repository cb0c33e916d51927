"""The official-style report: per-workload tables, summaries (speedup vs reference and vs the FlashInfer
baseline, win rate, all-pass gate, track score; beside them the score by FIB's own rule over every trace),
plots, and the provenance of every figure."""
import json
import math
import textwrap
from pathlib import Path

import pandas as pd

from harness.data.dataset import extras_path, read_traces
from harness.data.jsonio import encode_float, read_jsonl, write_json_atomic
from harness.eval.timing import CPU_LABEL

BASELINE_AUTHOR = "baseline"
GDN_TRACK_DEFINITIONS = 2   # the contest's expected kernel count for the GDN track (decode and prefill)


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
                    "timer": e.get("timer") or ev.environment.libs.get("timer", "?"),
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
    wall_clock = df.timer == CPU_LABEL   # a CPU run checks correctness: its speedups are no official figure
    df.loc[wall_clock, ["speedup_vs_reference", "speedup_vs_baseline"]] = math.nan
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


OFFICIAL_COLUMNS = ["official_score_vs_baseline", "official_win_rate_vs_baseline", "official_workloads", "traces",
                    "official_note"]


def official_scores(traces, baseline_author=BASELINE_AUTHOR):
    """Per (definition, solution), FIB's own rule (TraceSet.get_solution_score) over all its traces: against the
    one solution of `baseline_author`; per workload the lowest latency among the PASSED traces of each side;
    the workloads are those where the baseline has a PASSED trace and the solution has any trace; the speedup
    is baseline / solution and a win is a speedup > 1. Any non-PASSED trace of the solution, on any workload
    and however early, makes its score and win rate 0. official_note says why a figure is missing: 'not
    scored: ...' where FIB returns no score (the baseline itself, no comparable workload), 'undefined: ...'
    where FIB would refuse (no baseline or several, a PASSED trace without a positive latency) or where a
    CPU wall clock timed a trace (no official figure)."""
    out = []
    for definition, d in traces.groupby("definition", sort=False):
        bases = sorted(set(d.solution[d.author == baseline_author]))
        for solution, g in d.groupby("solution", sort=False):
            row = {"definition": definition, "solution": solution, "traces": len(g), "official_workloads": 0,
                   "official_score_vs_baseline": math.nan, "official_win_rate_vs_baseline": math.nan}
            out.append(row)
            # several baselines: those of several run folders; each folder's solutions take their own
            here = g.source.iloc[0]
            mine = bases if len(bases) == 1 else [b for b in bases if (d.source[d.solution == b] == here).all()]
            if g.author.iloc[0] == baseline_author:
                row["official_note"] = "not scored: the baseline"
                continue
            if len(mine) != 1:
                row["official_note"] = f"undefined: {len(mine)} solutions by {baseline_author!r}, FIB needs one"
                continue
            b = d[d.solution == mine[0]]
            if (g.timer == CPU_LABEL).any() or (b.timer == CPU_LABEL).any():
                row["official_note"] = "undefined: CPU wall clock"
                continue
            sol_passed, base_passed = g[g.status == "PASSED"], b[b.status == "PASSED"]
            if not ((sol_passed.latency_us > 0).all() and (base_passed.latency_us > 0).all()):
                row["official_note"] = "undefined: a PASSED trace without a positive latency (FIB raises)"
                continue
            base_best = base_passed.groupby("uuid").latency_us.min()
            common = sorted(set(base_best.index) & set(g.uuid))
            row["official_workloads"] = len(common)
            if not common:
                row["official_note"] = "not scored: no workload the baseline passed"
                continue
            failed = int((g.status != "PASSED").sum())
            if failed:
                row.update(official_score_vs_baseline=0.0, official_win_rate_vs_baseline=0.0,
                           official_note=f"0: {failed} of {len(g)} traces not PASSED")
                continue
            speedup = base_best[common] / sol_passed.groupby("uuid").latency_us.min()[common]
            row.update(official_score_vs_baseline=float(speedup.mean()),
                       official_win_rate_vs_baseline=float((speedup > 1).mean()), official_note="")
    return pd.DataFrame(out, columns=["definition", "solution", *OFFICIAL_COLUMNS])


def summarize(df, traces=None):
    """Per (definition, solution): the contest's and the library's figures over the last trace per pair, gated
    by all-pass; then the official_* columns, FIB's own rule over `traces` (load_all_traces: every trace; see
    official_scores), undefined when no traces are given."""
    out = []
    for (definition, solution), g in df.groupby(["definition", "solution"], sort=False):
        passed = g.status == "PASSED"
        all_pass = bool(passed.all())
        lat = g.latency_us[passed]
        has_base = g.baseline_us.notna()
        profiled = g.reference_us.notna() | ~passed  # a failed pair has no latency of its own
        official = not (g.timer == CPU_LABEL).all()
        out.append({
            "definition": definition, "solution": solution, "author": g.author.iloc[0], "workloads": len(g),
            "passed": int(passed.sum()), "all_pass": all_pass,
            # only over a full set of reference latencies: a subset's mean is not the contest's figure
            "mean_speedup_vs_reference": (math.nan if not official else 0.0 if not all_pass
                                          else float(g.speedup_vs_reference.mean()) if profiled.all() else math.nan),
            "reference_profiled": int(g.reference_us.notna().sum()),
            # over the workloads both sides have (as the library's ranking does), gated by all-pass
            "mean_speedup_vs_baseline": (math.nan if not has_base.any() or not official else
                                         float(g.speedup_vs_baseline[has_base].mean()) if all_pass else 0.0),
            "win_rate_vs_baseline": float((g.latency_us[has_base] < g.baseline_us[has_base]).mean())
            if has_base.any() and official else math.nan,
            "mean_latency_us": float(lat.mean()) if len(lat) else math.nan,
            "median_latency_us": float(lat.median()) if len(lat) else math.nan,
            "p95_latency_us": float(lat.quantile(0.95)) if len(lat) else math.nan,
            "mean_event_us": float(g.event_us[passed].mean()) if len(lat) else math.nan,
            "mean_divergence": float(g.divergence[passed].mean()) if len(lat) else math.nan,
            "max_abs_error": float(g.max_abs_error.max()), "max_rel_error": float(g.max_rel_error.max()),
            "timer": ", ".join(_timers(g)) or "-", "inputs": ", ".join(sorted(set(g.inputs))),
            "provenance": provenance_line(g),
        })
    summary = pd.DataFrame(out)
    if traces is None or traces.empty:
        return summary.assign(official_score_vs_baseline=math.nan, official_win_rate_vs_baseline=math.nan,
                              official_workloads=math.nan, traces=math.nan,
                              official_note="undefined: not computed (no traces given)")
    return summary.merge(official_scores(traces), on=["definition", "solution"], how="left")


def track_scores(summary):
    """Per author: its best gated score per definition, averaged over definitions (the library's author
    score; the GDN track averaged decode and prefill). Beside them the official figures (FIB's
    get_author_score and the contest's track formula): the author's best official score per definition (its
    win rate goes with it), averaged over the definitions where it has one; official_track_score = that average
    * official_definitions / GDN_TRACK_DEFINITIONS, i.e. the sum over definitions / 2, so a missing kernel
    counts 0. Undefined where any of the author's official figures is (FIB would refuse to score)."""
    rows = []
    for author, g in summary.groupby("author"):
        best = g.groupby("definition")[["mean_speedup_vs_reference", "mean_speedup_vs_baseline"]].max()
        rows.append({"author": author, "definitions": len(best),
                     # a definition without its figure leaves the track score undefined, not smaller
                     "track_score_vs_reference": float(best.mean_speedup_vs_reference.mean(skipna=False)),
                     "track_score_vs_baseline": float(best.mean_speedup_vs_baseline.mean(skipna=False)),
                     **_official_track(g)})
    return pd.DataFrame(rows)


def _official_track(g):
    """One author's official figures from its summary rows (see track_scores)."""
    none = {"official_track_score": math.nan, "official_score_vs_baseline": math.nan,
            "official_win_rate_vs_baseline": math.nan, "official_definitions": 0}
    notes = g.official_note.fillna("undefined: no trace")
    if notes.str.startswith("undefined").any():
        return none
    scored = g[g.official_score_vs_baseline.notna()].sort_values("solution", kind="stable")
    if scored.empty:   # FIB ranks no score for it (e.g. the baseline author)
        return none
    best = scored.loc[scored.groupby("definition").official_score_vs_baseline.idxmax()]
    return {"official_track_score": float(best.official_score_vs_baseline.sum() / GDN_TRACK_DEFINITIONS),
            "official_score_vs_baseline": float(best.official_score_vs_baseline.mean()),
            "official_win_rate_vs_baseline": float(best.official_win_rate_vs_baseline.mean()),
            "official_definitions": len(best)}


def run_time(df):
    """Seconds the harness spent: per definition preparing workloads (inputs, reference outputs, and the
    reference timing within that; with --prepare-jobs the outputs were made before the loop, and the last
    column adds up those per-process seconds, which ran side by side), and per solution running its pairs.
    '-' where a run did not record it."""
    per_workload = df.drop_duplicates(["source", "definition", "uuid"])
    prep = per_workload.groupby("definition", sort=False).agg(
        workloads=("uuid", "size"), prepare_s=("prepare_s", lambda x: x.sum(min_count=1)),
        of_which_reference_timing_s=("reference_s", lambda x: x.sum(min_count=1)),
        before_the_loop_in_processes_s=("parallel_prepare_s", lambda x: x.sum(min_count=1))).reset_index()
    pairs = df.groupby(["definition", "solution"], sort=False).agg(
        pairs=("uuid", "size"), pairs_s=("wall_s", lambda x: x.sum(min_count=1)),
        mean_s_per_pair=("wall_s", "mean")).reset_index()
    return prep, pairs


RUN_COLUMNS = ["started", "definition", "harness", "isolation", "workloads", "pairs", "wall_s", "parallel_prepare_s",
               "prepare_jobs", "reference_timing_s", "reference_output_cache"]


def runs_table(out_dir):
    """The make-eval passes recorded in out_dir/runs.jsonl, or None."""
    path = Path(out_dir) / "runs.jsonl"
    if not path.exists():
        return None
    rows = [r for _, r in read_jsonl(path, allow_partial_tail=True)]
    return pd.DataFrame(rows).reindex(columns=RUN_COLUMNS) if rows else None


def _lib_values(df):
    """Every value each environment.libs key takes in df (input_digest left out: per workload, in the traces)."""
    libs = {}
    for text in df.libs.unique():
        for k, v in json.loads(text).items():
            if k != "input_digest":
                libs.setdefault(k, set()).add(v)
    return libs


def _timers(df):
    """The timers of the rows that have a latency (a failed pair was not timed)."""
    return sorted(set(df.timer[df.latency_us.notna()]))


def provenance(df):
    libs = _lib_values(df)
    return {"hardware": sorted(set(df.hardware)), "timers": _timers(df),
            "inputs": sorted(set(df.inputs)),
            "reference_timing": sorted(set(df.reference_timing)),
            "libs": {k: sorted(v) for k, v in sorted(libs.items())},
            "first_trace": str(df.timestamp.min()), "last_trace": str(df.timestamp.max()),
            "sources": sorted(set(df.source))}


def provenance_line(df):
    """One line for CSV columns and plot footers: GPU, software, timer, harness commit, inputs, dates."""
    libs = _lib_values(df)
    get = lambda k: "/".join(sorted(map(str, libs.get(k, {"?"}))))  # noqa: E731
    return (f"{'/'.join(sorted(set(df.hardware)))} ({get('sm_count')} SMs), driver {get('driver')}, "
            f"CUDA {get('cuda')}, torch {get('torch')}, Triton {get('triton')}, FlashInfer {get('flashinfer')}, "
            f"harness {get('harness')}; timer {'/'.join(_timers(df)) or '-'}; inputs "
            f"{'/'.join(sorted(set(df.inputs)))}; {str(df.timestamp.min())[:10]}..{str(df.timestamp.max())[:10]}")


def _md_table(df, floatfmt=".3f"):
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            cells.append(format(v, floatfmt) if isinstance(v, float) and math.isfinite(v) else
                         ("-" if isinstance(v, float) else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plots(df, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for definition, g in df.groupby("definition"):
        axes = [c for c in g.columns if c.startswith("axis_") and g[c].notna().any()]
        xcol = next((c for c in ("axis_batch_size", "axis_total_seq_len") if c in axes), axes[0])
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
        for solution, s in g.groupby("solution"):
            s = s.sort_values(xcol)
            axes[0].plot(s[xcol], s.latency_us, "o-", ms=3, label=solution)
            axes[1].plot(range(len(s)), s.speedup_vs_baseline, "o", ms=3, label=solution)
        axes[0].set(xlabel=xcol.removeprefix("axis_"), ylabel="latency (us, official timer)", yscale="log",
                    xscale="log", title=definition)
        axes[1].set(xlabel="workload (sorted by size)", ylabel="speedup vs FlashInfer baseline", yscale="log",
                    title="speedup per workload")
        axes[1].axhline(1.0, color="gray", lw=0.8)
        for ax in axes:
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        fig.text(0.01, 0.01, textwrap.fill(provenance_line(g), 230), fontsize=6.5, color="dimgray")
        p = out / f"{definition}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


OFFICIAL_SENTENCE = (
    "The official_* columns follow FlashInfer-Bench's own rule (TraceSet.get_solution_score / get_author_score) "
    "over every trace of each solution, where the harness's figures use only the last trace per workload: per "
    "workload the lowest latency among the PASSED traces of the solution and of the baseline, a 0 score and win "
    "rate when any trace of the solution, even an earlier one, did not pass, no score for the baseline itself, "
    "and official_track_score = the sum of the author's best official score per definition / "
    f"{GDN_TRACK_DEFINITIONS} (the contest's avg_speedup * definitions / {GDN_TRACK_DEFINITIONS}).")


def write_report(out_dir, definitions, sources=None, title="GDN track evaluation", dataset=None):
    """Write report.md, per-definition CSVs, summary.json and plots under out_dir/report/."""
    out = Path(out_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    df = load_rows(sources or [out_dir], definitions)
    if df.empty:
        raise ValueError(f"no traces under {sources or [out_dir]}")
    summary, prov = summarize(df, load_all_traces(sources or [out_dir], definitions)), provenance(df)
    if dataset is not None:  # how much of each definition every solution covered
        totals = {d.name: len(dataset.workloads(d)) for d in definitions}
        summary["of_workloads"] = summary.definition.map(totals)
        prov["coverage"] = {f"{r.definition} / {r.solution}": f"{r.workloads} of {r.of_workloads}"
                            for r in summary.itertuples()}
    track = track_scores(summary)
    for definition, g in df.groupby("definition"):
        # libs: each row's full provenance (JSON)
        g.drop(columns=["warning_list", "log"]).to_csv(out / f"{definition}.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    records = lambda t: [{k: encode_float(v) for k, v in r.items()} for r in t.to_dict("records")]  # noqa: E731
    write_json_atomic(out / "summary.json", {"provenance": prov, "summary": records(summary),
                                              "track": records(track)})
    plots = _plots(df, out)
    md = [f"# {title}", ""]
    partial = [k for k, v in prov.get("coverage", {}).items() if v.split(" of ")[0] != v.split(" of ")[1]]
    if partial:
        md += [f"**PARTIAL RUN: not every workload was evaluated** ({', '.join(partial)}; see coverage below). "
               "Means over a partial run are not comparable with full-run figures.", ""]
    unprofiled = summary[summary.reference_profiled < summary.passed]
    if len(unprofiled):
        md += ["**Reference latency missing for some workloads** (" + ", ".join(
            f"{r.definition} / {r.solution}: {r.reference_profiled} of {r.passed} profiled"
            for r in unprofiled.itertuples()) + "): their speedup vs reference is '-', and the mean over "
            "the definition is left undefined.", ""]
    md += ["## Provenance", ""]
    md += [f"- {k}: {v}" for k, v in prov.items()]
    md += ["", "Inputs marked stand-in are synthesised (the official GDN blobs are not public); latencies are "
           "in microseconds from the timer named above.", "", "## Summary", "",
           _md_table(summary[["definition", "solution", "passed", "workloads", "all_pass", "mean_speedup_vs_reference",
                              "reference_profiled", "mean_speedup_vs_baseline", "win_rate_vs_baseline",
                              "official_score_vs_baseline", "official_win_rate_vs_baseline", "traces",
                              "mean_latency_us", "median_latency_us", "p95_latency_us", "mean_event_us",
                              "mean_divergence"]]),
           "", "Scores are gated: any workload that does not pass makes the solution's mean speedups 0. The track "
           "score takes each author's best solution per definition.", "", OFFICIAL_SENTENCE, "",
           "## Track", "", _md_table(track), ""]
    if df.wall_s.notna().any():
        prep, pairs = run_time(df)
        md += ["## Harness run time (s)", "", "From the harness extras, one row per workload and solution as kept in "
               "the report (a pair evaluated again counts once). prepare_s: inside the loop; "
               "before_the_loop_in_processes_s: inputs and reference outputs made by --prepare-jobs processes side "
               "by side (their sum, not wall time: see Runs).",
               "", _md_table(prep, ".1f"), "", _md_table(pairs, ".2f"), ""]
    runs = runs_table(out_dir)
    if runs is not None:
        md += ["## Runs (make eval)", "",
               f"Each `make eval` pass over a definition, from {Path(out_dir).name}/runs.jsonl (wall time of the "
               "whole pass: preparation, reference timing, all pairs).", "", _md_table(runs, ".1f"), ""]
    for definition, g in df.groupby("definition"):
        axes = [c for c in g.columns if c.startswith("axis_") and g[c].notna().any()]
        cols = ["uuid", *axes, "solution", "status", "latency_us", "reference_us", "speedup_vs_reference",
                "speedup_vs_baseline", "event_us", "divergence", "max_abs_error", "max_rel_error"]
        t = g.sort_values([*axes, "solution"])[cols].copy()
        t["uuid"] = t.uuid.str[:8]
        md += [f"## {definition}", "", f"![{definition}]({definition}.png)", "", _md_table(t, ".4g"), ""]
    (out / "report.md").write_text("\n".join(md) + "\n")
    return out, summary, track, plots
