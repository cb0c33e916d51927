"""Side-by-side comparison of several solutions evaluated in one run (same inputs, timer and GPU):
latencies per workload, ratios to a base solution, per-bucket summaries, win/loss, the all-pass gate."""
import json
import math
import textwrap
from pathlib import Path

import pandas as pd

from harness.eval.timing import CPU_LABEL
from harness.report.markdown import md_table
from harness.report.plotting import finish, nothing_to_plot, on_log_axis
from harness.report.provenance import provenance, provenance_line
from harness.report.rows import load_rows

T_BUCKETS = [(0, 64, "T<64"), (64, 512, "T<512"), (512, 2048, "T<2048"), (2048, 8192, "T<8192"),
             (8192, math.inf, "T=8192")]


def bucket_of(row):
    if "axis_batch_size" in row and not pd.isna(row.get("axis_batch_size")):
        return f"B={int(row['axis_batch_size'])}"
    t = row.get("axis_total_seq_len")
    if t is None or pd.isna(t):
        return "all"
    return next(label for lo, hi, label in T_BUCKETS if lo <= t < hi)


def bucket_order(labels):
    def key(label):
        if label.startswith("B="):
            return (0, int(label[2:]))
        names = [b[2] for b in T_BUCKETS]
        return (1, names.index(label)) if label in names else (2, 0)
    return sorted(set(labels), key=key)


def comparison_tables(df, base):
    """(wide per-workload table, per-bucket table, per-solution summary) with ratios to `base`."""
    if base not in set(df.solution):
        raise ValueError(f"base solution {base!r} is not among {sorted(set(df.solution))}")
    df = df.copy()
    df["bucket"] = df.apply(bucket_of, axis=1)
    status = df.pivot_table(index=["uuid", "bucket"], columns="solution", values="status", aggfunc="last")
    # on the status grid: a solution that failed everywhere (no latency at all) keeps its column and row
    lat = df.pivot_table(index=["uuid", "bucket"], columns="solution", values="latency_us",
                         aggfunc="last").reindex(index=status.index, columns=status.columns)
    wide = lat.copy()
    for s in lat.columns:
        if s != base:
            wide[f"{s} / {base}"] = lat[s] / lat[base]  # > 1: slower than the base
    wide = wide.reset_index()
    per_bucket = []
    for bucket in bucket_order(df.bucket):
        rows = lat.xs(bucket, level="bucket")
        entry = {"bucket": bucket, "workloads": len(rows)}
        for s in lat.columns:
            entry[f"{s} mean us"] = float(rows[s].mean())
            entry[f"{s} n"] = int(rows[s].notna().sum())
            if s != base:
                # like with like: both means over the workloads both have a latency on (none: NaN, not a number)
                both = rows[s].notna() & rows[base].notna()
                entry[f"{s} / {base}"] = float(rows[s][both].mean() / rows[base][both].mean()) if both.any() \
                    else math.nan
                entry[f"{s} / {base} n"] = int(both.sum())
        per_bucket.append(entry)
    summary = []
    for s in lat.columns:
        st = status[s].dropna()   # NaN: a workload this solution has no trace for
        wins = int((lat[s] < lat[base]).sum()) if s != base else 0
        losses = int((lat[s] > lat[base]).sum()) if s != base else 0
        summary.append({"solution": s, "all_pass": bool((st == "PASSED").all()), "passed": int((st == "PASSED").sum()),
                        "workloads": len(st), "mean_us": float(lat[s].mean()),
                        f"mean ratio to {base}": float((lat[s] / lat[base]).mean()),
                        f"wins vs {base}": wins, f"losses vs {base}": losses})
    return wide, _counted(pd.DataFrame(per_bucket), lat.columns, base), pd.DataFrame(summary)


def _counted(buckets, solutions, base):
    """The bucket table with a count column only where a figure covers fewer workloads than its bucket has:
    `<s> n` (the workloads behind <s>'s mean, and its ratio), `<s> / <base> n` where the ratio covers fewer still
    (workloads <s> has a latency on and the base has none)."""
    drop = []
    for s in solutions:
        n = buckets[f"{s} n"]
        if (n == buckets.workloads).all():
            drop.append(f"{s} n")
        if s != base and (buckets[f"{s} / {base} n"] == n).all():
            drop.append(f"{s} / {base} n")
    return buckets.drop(columns=drop)


def solution_runs(df):
    """Per solution: harness commits, first/last trace time, and a run number. Solutions share a number when the
    same runs evaluated them (the run each pair's extras line names); traces from before runs were named fall back
    on their times: solutions whose trace spans overlap (with the same commits) ran in one run."""
    named = "run" in df and df.run.notna().all()
    rows = []
    for sol, g in df.groupby("solution", sort=True):
        commits = sorted({json.loads(x).get("harness", "?") for x in g.libs})
        rows.append({"solution": sol, "harness": ", ".join(commits), "first_trace": str(g.timestamp.min()),
                     "last_trace": str(g.timestamp.max()), "key": tuple(sorted(set(g.run))) if named else None})
    runs = pd.DataFrame(rows).sort_values("first_trace", kind="stable").reset_index(drop=True)
    run, end, commit, ids, numbers = 0, "", None, [], {}
    for r in runs.itertuples():
        if named:
            run = numbers.setdefault(r.key, len(numbers) + 1)
        elif r.first_trace > end or r.harness != commit:
            run, commit = run + 1, r.harness
        end = max(end, r.last_trace)
        ids.append(run)
    return runs.drop(columns="key").assign(run=ids)


def selected(df, pairs):
    """The rows of `pairs`, (solution names, workload uuids) a run evaluated; every row when it is None."""
    return df if pairs is None else df[df.solution.isin(pairs[0]) & df.uuid.isin(pairs[1])]


def write_comparison(out_dir, definition, base, sources=None, pairs=None):
    """compare/<definition>.md, .csv, _buckets.csv and .png from the traces of `sources` (default: out_dir), those of
    `pairs` only where given (a folder can hold other runs' solutions and workloads); (folder, summary, buckets)."""
    from harness.report.state_copy import copy_section, load_copies   # it imports bucket_of from here

    out = Path(out_dir) / "compare"
    out.mkdir(parents=True, exist_ok=True)
    df = selected(load_rows(sources or [out_dir], [definition]), pairs)
    if df.empty:
        raise ValueError("no traces to compare")
    wide, buckets, summary = comparison_tables(df, base)
    stem = definition.name
    line = provenance_line(df)
    wide.assign(provenance=line).to_csv(out / f"{stem}.csv", index=False)
    buckets.assign(provenance=line).to_csv(out / f"{stem}_buckets.csv", index=False)
    prov = provenance(df)
    md = [f"# Comparison on {stem} (base: {base})", "", "## Provenance", ""]
    md += [f"- {k}: {v}" for k, v in prov.items()]
    runs = solution_runs(df)
    if runs.run.nunique() == 1:
        where = "All solutions ran in one run, interleaved per workload, on the same inputs, timer and device."
    else:
        where = (f"The solutions come from {runs.run.nunique()} runs (same inputs, timer and GPU model; solutions "
                 "with the same run number ran interleaved per workload), so ratios across runs also carry "
                 "run-to-run variation.\n\n" + md_table(runs))
    copies = copy_section(df, load_copies(sources or [out_dir], definition), list(summary.solution))
    base_rows = df[df.solution == base]
    unpassed = int(base_rows.latency_us.isna().sum())
    if unpassed:
        md += ["", f"**The base, {base}, has no latency on {unpassed} of its {len(base_rows)} workloads** (not "
               "PASSED): every ratio to it there is '-'" + (", so all of them are." if unpassed == len(base_rows)
                                                            else ".")]
    if (df.timer == CPU_LABEL).any():
        md += ["", "**Timed with the CPU wall clock** (a correctness run: Triton through its interpreter): these "
               "latencies and ratios say nothing about the kernels' speed on a GPU."]
    md += ["", "Ratios are latency / base latency (> 1 means slower than the base): per workload; in the summary, "
           "the mean of those per workload ratios; by bucket, the solution's mean latency over the base's mean on the "
           "same workloads, those of the bucket where both have a latency (PASSED), '-' where there is none. " + where,
           "", "## Summary", "", md_table(summary), "", "## By bucket", "", *_counts_note(buckets, base),
           md_table(buckets), "", f"![{stem}]({stem}.png)", "", *copies,
           "## Per workload", "", md_table(wide.assign(uuid=wide.uuid.str[:8]), ".4g"), ""]
    (out / f"{stem}.md").write_text("\n".join(md) + "\n")
    _plot(wide, buckets, base, out / f"{stem}.png", stem, line)
    return out, summary, buckets


def _counts_note(buckets, base):
    """Markdown lines on the bucket table's count columns; none where every figure covers its whole bucket."""
    if not any(c.endswith(" n") for c in buckets.columns):
        return []
    return [f"A column `<solution> n` counts the workloads behind that solution's mean and its ratio where fewer than "
            f"the bucket's `workloads` have a latency; `<solution> / {base} n`, where present, those behind the ratio "
            "where the base lacks a latency on some of them.", ""]


def _plot(wide, buckets, base, path, title, footer):
    """Mean latency per bucket, one bar per solution, on a log axis; a solution without a latency (it failed
    everywhere) is left out, and a plot with no latency at all says so."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sols = [(c, y) for c in buckets.columns if c.endswith(" mean us") and (y := on_log_axis(buckets[c])) is not None]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels = dict(ylabel="mean latency (us)", title=f"{title} (base {base})")
    width = 0.8 / max(len(sols), 1)
    for i, (c, y) in enumerate(sols):
        ax.bar([x + i * width for x in range(len(buckets))], y, width, label=c.removesuffix(" mean us"))
    if sols:
        ax.set_xticks([x + width * (len(sols) - 1) / 2 for x in range(len(buckets))], buckets.bucket)
        ax.set(yscale="log", **labels)
    else:
        nothing_to_plot(ax, "no latency to plot: no solution passed a workload", **labels)
    finish(ax, axis="y")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.text(0.01, 0.01, textwrap.fill(footer, 170), fontsize=6, color="dimgray")
    fig.savefig(path, dpi=110)
    plt.close(fig)
