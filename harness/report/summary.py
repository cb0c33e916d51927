"""The official-style report: per-workload tables, summaries (speedup vs reference and vs the FlashInfer
baseline, win rate, all-pass gate, track score; beside them the score by FIB's own rule over every trace),
plots, and the provenance of every figure."""
import math
import textwrap
from pathlib import Path

import pandas as pd

from harness.data.jsonio import encode_float, read_jsonl, write_json_atomic
from harness.report.markdown import md_table
from harness.report.official_score import OFFICIAL_SENTENCE, official_scores, official_track
from harness.report.plotting import finish, loggable, nothing_to_plot, on_log_axis
from harness.report.provenance import provenance, provenance_line, timers
from harness.report.rows import load_all_traces, load_rows, wall_clock


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
        official = not wall_clock(g).all()
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
            "timer": ", ".join(timers(g)) or "-", "inputs": ", ".join(sorted(set(g.inputs))),
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
                     **official_track(g)})
    return pd.DataFrame(rows)


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


def _plots(df, out):
    """One figure per definition: latency by size and speedup vs the baseline per workload, on log axes; a
    solution with nothing to show on a panel (every pair failed, or no speedup) is left out of it, and a panel
    with nothing to show says so."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for definition, g in df.groupby("definition"):
        axes = [c for c in g.columns if c.startswith("axis_") and g[c].notna().any()]
        xcol = next((c for c in ("axis_batch_size", "axis_total_seq_len") if c in axes), axes[0])
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
        latency = dict(xlabel=xcol.removeprefix("axis_"), ylabel="latency (us, official timer)", title=definition)
        speedup = dict(xlabel="workload (sorted by size)", ylabel="speedup vs FlashInfer baseline",
                       title="speedup per workload")
        for solution, s in g.groupby("solution"):
            s = s.sort_values(xcol)
            x = s[xcol].where(loggable(s[xcol]))
            if (y := on_log_axis(s.latency_us.where(x.notna()))) is not None:
                axes[0].plot(x, y, "o-", ms=3, label=solution)
            if (y := on_log_axis(s.speedup_vs_baseline)) is not None:
                axes[1].plot(range(len(s)), y, "o", ms=3, label=solution)
        if axes[0].lines:
            axes[0].set(yscale="log", xscale="log", **latency)
        else:
            nothing_to_plot(axes[0], "no latency to plot: no pair passed", **latency)
        if axes[1].lines:
            axes[1].set(yscale="log", **speedup)
            axes[1].axhline(1.0, color="gray", lw=0.8)
        else:
            nothing_to_plot(axes[1], "no speedup to plot: no workload where both this solution and the FlashInfer "
                                     "baseline passed, on a GPU timer", **speedup)
        for ax in axes:
            finish(ax)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        fig.text(0.01, 0.01, textwrap.fill(provenance_line(g), 230), fontsize=6.5, color="dimgray")
        p = out / f"{definition}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


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
    if wall_clock(df).all():
        md += ["**CPU run: latencies are wall clock, and no speedup vs reference or baseline is taken** (a command "
               "run on the CPU times no reference).", ""]
    elif len(unprofiled):
        md += ["**Reference latency missing for some workloads** (" + ", ".join(
            f"{r.definition} / {r.solution}: {r.reference_profiled} of {r.passed} profiled"
            for r in unprofiled.itertuples()) + "): their speedup vs reference is '-', and the mean over "
            "the definition is left undefined.", ""]
    md += ["## Provenance", ""]
    md += [f"- {k}: {v}" for k, v in prov.items()]
    md += ["", "Inputs marked stand-in are synthesised (the official GDN blobs are not public); latencies are "
           "in microseconds from the timer named above.", "", "## Summary", "",
           md_table(summary[["definition", "solution", "passed", "workloads", "all_pass", "mean_speedup_vs_reference",
                              "reference_profiled", "mean_speedup_vs_baseline", "win_rate_vs_baseline",
                              "official_score_vs_baseline", "official_win_rate_vs_baseline", "traces",
                              "mean_latency_us", "median_latency_us", "p95_latency_us", "mean_event_us",
                              "mean_divergence"]]),
           "", "Scores are gated: any workload that does not pass makes the solution's mean speedups 0. The track "
           "score takes each author's best solution per definition.", "", OFFICIAL_SENTENCE, "",
           "## Track", "", md_table(track), ""]
    if df.wall_s.notna().any():
        prep, pairs = run_time(df)
        md += ["## Harness run time (s)", "", "From the harness extras, one row per workload and solution as kept in "
               "the report (a pair evaluated again counts once). prepare_s: inside the loop; "
               "before_the_loop_in_processes_s: inputs and reference outputs made by --prepare-jobs processes side "
               "by side (their sum, not wall time: see Runs).",
               "", md_table(prep, ".1f"), "", md_table(pairs, ".2f"), ""]
    runs = runs_table(out_dir)
    if runs is not None:
        md += ["## Runs (make eval)", "",
               f"Each `make eval` pass over a definition, from {Path(out_dir).name}/runs.jsonl (wall time of the "
               "whole pass: preparation, reference timing, all pairs).", "", md_table(runs, ".1f"), ""]
    for definition, g in df.groupby("definition"):
        axes = [c for c in g.columns if c.startswith("axis_") and g[c].notna().any()]
        cols = ["uuid", *axes, "solution", "status", "latency_us", "reference_us", "speedup_vs_reference",
                "speedup_vs_baseline", "event_us", "divergence", "max_abs_error", "max_rel_error"]
        t = g.sort_values([*axes, "solution"])[cols].copy()
        t["uuid"] = t.uuid.str[:8]
        md += [f"## {definition}", "", f"![{definition}]({definition}.png)", "", md_table(t, ".4g"), ""]
    (out / "report.md").write_text("\n".join(md) + "\n")
    return out, summary, track, plots
