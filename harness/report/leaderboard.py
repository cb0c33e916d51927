"""Leaderboard per definition: every entry of a run (ours, the FlashInfer baseline, public entries) ranked by
its mean speedup vs the baseline, with win rates vs ours, per-bucket latencies, why each failure failed, the
harness warnings each entry raised, and where every figure came from."""
import math
import textwrap
from pathlib import Path

import pandas as pd

from harness.eval.console import failure_reason, message_kind
from harness.report.compare import bucket_of, bucket_order
from harness.report.markdown import md_table
from harness.report.plotting import finish, nothing_to_plot, on_log_axis
from harness.report.provenance import lib_values, provenance_line, timers
from harness.report.rows import load_rows, wall_clock
from harness.report.state_copy import copy_section, load_copies
from harness.report.summary import summarize

MAX_GROUPS = 8  # distinct failure reasons / warnings shown per entry and status; the rest are counted


def write_leaderboard(out_dir, definitions, ours, sources=None, facts=None):
    """Write <out_dir>/leaderboard/<definition>.md, .csv and .png for each definition with traces in `sources`
    (default: out_dir itself). `ours`: {definition name: our solution's name}; `facts`: {solution name:
    "repo@commit"} for the provenance. Returns {definition name: leaderboard table}."""
    out = Path(out_dir) / "leaderboard"
    out.mkdir(parents=True, exist_ok=True)
    sources = [Path(s) for s in (sources or [out_dir])]
    df = load_rows(sources, definitions)
    if df.empty:
        raise ValueError(f"no traces under {[str(s) for s in sources]}")
    tables, by_name = {}, {d.name: d for d in definitions}
    for definition, g in df.groupby("definition", sort=False):
        mine = (ours or {}).get(definition)
        if mine is not None and mine not in set(g.solution):
            raise ValueError(f"{definition}: our solution {mine!r} is not among {sorted(set(g.solution))}")
        g = g.assign(bucket=g.apply(bucket_of, axis=1))
        table = leaderboard_table(g, mine)
        line = provenance_line(g)
        table.assign(provenance=line).to_csv(out / f"{definition}.csv", index=False)
        _plot(table, out / f"{definition}.png", definition, line)
        copies = copy_section(g, load_copies(sources, by_name[definition]), table.solution)
        (out / f"{definition}.md").write_text(_markdown(definition, g, table, line, facts or {}, copies))
        tables[definition] = table
    return tables


def _original_name(row):
    """load_rows labels a solution found in several sources 'name [folder]'; the facts know it as 'name'."""
    return row.solution.removesuffix(f" [{Path(row.source).name}]")


def leaderboard_table(g, ours):
    """One row per solution of one definition, best first: gated mean speedup vs the baseline (the official
    figure), then the mean over the workloads both passed."""
    summary = summarize(g).set_index("solution")
    official = not wall_clock(g).all()  # wall-clock latencies give no speedups or wins
    total = g.uuid.nunique()
    buckets = bucket_order(g.bucket)
    ours_lat = g[g.solution == ours].set_index("uuid").latency_us if ours else None
    rows = []
    for solution, s in g.groupby("solution", sort=False):
        passed = s[s.status == "PASSED"]
        row = {"solution": solution, "author": s.author.iloc[0], "ours": solution == ours,
               "passed": len(passed), "workloads": len(s), "of_workloads": total,
               "mean_latency_us": summary.at[solution, "mean_latency_us"],
               # a workload with no trace (given up on, not reached) has not passed either
               "gated_speedup_vs_baseline": summary.at[solution, "mean_speedup_vs_baseline"]
               if s.uuid.nunique() == total else 0.0,
               # load_rows leaves speedup_vs_baseline NaN unless both passed
               "speedup_vs_baseline": s.speedup_vs_baseline.mean(),
               "win_rate_vs_ours": _win_rate(s, ours_lat, total) if official and ours and solution != ours
               else math.nan}
        for b in buckets:
            row[f"{b} mean us"] = passed.latency_us[passed.bucket == b].mean()
        rows.append(row)
    table = pd.DataFrame(rows)
    # every workload passed first (without baseline traces every speedup is NaN, which must not rank a solution
    # that passed all below ones that failed), then the speedups, then passes and mean latency
    table = table.assign(complete=table.passed == table.of_workloads).sort_values(
        ["complete", "gated_speedup_vs_baseline", "speedup_vs_baseline", "passed", "mean_latency_us"],
        ascending=[False, False, False, False, True], na_position="last", kind="stable").drop(columns="complete")
    table.insert(0, "rank", range(1, len(table) + 1))
    return table.reset_index(drop=True)


def _win_rate(s, ours_lat, total):
    """Workloads where both passed and this solution is faster than ours, over all the definition's workloads
    (a failure on either side is no win)."""
    lat = s.set_index("uuid").latency_us  # NaN where it failed; a comparison with NaN is False
    return float((lat < ours_lat.reindex(lat.index)).sum() / total)


def grouped(items):
    """(uuid, text) pairs -> rows of (text pattern, workloads, example text, example uuids), commonest first."""
    if not items:
        return pd.DataFrame(columns=["pattern", "workloads", "example", "uuids"])
    df = pd.DataFrame(items, columns=["uuid", "text"]).assign(pattern=lambda x: x.text.map(message_kind))
    out = df.groupby("pattern", sort=False).agg(workloads=("uuid", "nunique"), example=("text", "first"),
                                                uuids=("uuid", lambda u: sorted(set(u))))
    return out.reset_index().sort_values("workloads", ascending=False, kind="stable")


def failure_sections(g):
    """Markdown: per entry with a non-PASSED workload, each status with its count and its grouped reasons."""
    md = []
    for solution, s in g[g.status != "PASSED"].groupby("solution", sort=False):
        md += [f"### {solution}", ""]
        for status, f in s.groupby("status", sort=True):
            md.append(f"- **{status}** on {len(f)} of {(g.solution == solution).sum()} workloads")
            reasons = grouped([(r.uuid, "\n".join(failure_reason(r.log))) for r in f.itertuples()])
            for r in reasons.head(MAX_GROUPS).itertuples():
                md += [f"  - {r.workloads} workload(s) ({_uuids(r.uuids)}):", "", "    ```",
                       *(f"    {x[:300]}" for x in r.example.splitlines()), "    ```", ""]
            if len(reasons) > MAX_GROUPS:
                md.append(f"  - ... and {len(reasons) - MAX_GROUPS} more distinct reasons (see the traces)")
        md.append("")
    return md or ["Every entry passed every workload.", ""]


def warning_table(g):
    """One row per (entry, warning kind): the workloads it appeared on and one full example."""
    rows = []
    for solution, s in g.groupby("solution", sort=False):
        found = grouped([(r.uuid, w) for r in s.itertuples() for w in r.warning_list])
        for r in found.head(MAX_GROUPS).itertuples():
            rows.append({"solution": solution, "workloads": f"{r.workloads}/{len(s)}", "warning": _cell(r.example),
                         "example workloads": _uuids(r.uuids)})
        if len(found) > MAX_GROUPS:
            rows.append({"solution": solution, "workloads": "-", "warning": f"... and {len(found) - MAX_GROUPS} "
                         "more kinds (see the harness extras)", "example workloads": "-"})
    return pd.DataFrame(rows)


def provenance_table(g, facts):
    """Per entry: its code (repo@commit where known), the harness commit(s), GPU, timer and inputs."""
    rows = []
    for solution, s in g.groupby("solution", sort=False):
        libs = lib_values(s)
        rows.append({"solution": solution, "author": s.author.iloc[0],
                     "code": facts.get(solution) or facts.get(_original_name(s.iloc[0])) or "-",
                     "solution_digest": ", ".join(sorted(libs.get("solution_digest", {"?"}))),
                     "harness": ", ".join(sorted(libs.get("harness", {"?"}))),
                     "gpu": ", ".join(sorted(set(s.hardware))), "timer": ", ".join(timers(s)) or "-",
                     "inputs": ", ".join(sorted(set(s.inputs))), "source": ", ".join(sorted(set(s.source)))})
    return pd.DataFrame(rows)


def _cell(text):
    """A Markdown table cell: no line breaks, no column separators."""
    return " / ".join(text.splitlines()).replace("|", "\\|")


def _uuids(uuids, n=3):
    return ", ".join(u[:8] for u in uuids[:n]) + (f" +{len(uuids) - n}" if len(uuids) > n else "")


def _display(table):
    """The table as shown in Markdown: passed as 'n/N', ours in bold."""
    t = table.copy()
    t["solution"] = [f"**{s}** (ours)" if o else s for s, o in zip(t.solution, t.ours)]
    t["passed"] = [f"{p}/{n}" + (f" (of {m})" if n < m else "") for p, n, m in
                   zip(t.passed, t.workloads, t.of_workloads)]
    return t.drop(columns=["ours", "workloads", "of_workloads"])


def bucket_counts(g):
    """Markdown lines: the bucket means that average fewer workloads than their bucket has (some failed or have no
    trace), as passed/bucket per entry in `g`'s order; none where every mean covers its whole bucket."""
    total = g.drop_duplicates("uuid").bucket.value_counts()
    passed = g[g.status == "PASSED"].drop_duplicates(["solution", "uuid"])
    short = []
    for solution, s in g.groupby("solution", sort=False):
        n = passed[passed.solution == solution].bucket.value_counts()
        cells = [f"{b} {n[b]}/{total[b]}" for b in bucket_order(g.bucket) if 0 < n.get(b, 0) < total[b]]
        if cells:
            short.append(f"{solution} ({', '.join(cells)})")
    if not short:
        return []
    return ["Bucket means over fewer workloads than the bucket has (passed/bucket; '-': none passed), so not over "
            "the same workloads as the other entries' means in that column: " + "; ".join(short) + ".", ""]


def _markdown(definition, g, table, line, facts, copies):
    # every section lists the entries in leaderboard order
    rank = dict(zip(table.solution, table["rank"]))
    g = g.sort_values("solution", key=lambda s: s.map(rank), kind="stable")
    warnings = warning_table(g)
    md = [f"# Leaderboard: {definition}", "", f"Provenance: {line}", "",
          "Ranked by `gated_speedup_vs_baseline`, the official figure: the mean of FlashInfer baseline latency / "
          "latency over the workloads the baseline passed, and 0 when any workload failed or has no trace. "
          "Ties (all the failing entries) are broken by `speedup_vs_baseline`, the same mean over the workloads "
          "both passed, ungated. `mean_latency_us` and the bucket columns average the PASSED workloads only. "
          "`win_rate_vs_ours`: the fraction of all workloads where both passed and the entry was faster than ours. "
          "Latencies in microseconds.", "", md_table(_display(table), ".3f"), "", *bucket_counts(g),
          f"![{definition}]({definition}.png)", "",
          *copies, "## Failures", "", "The reason is the evaluator's message or the end of the last traceback in "
          "the trace log; reasons that differ only in numbers are grouped.", "", *failure_sections(g),
          "## Harness warnings", "", "Beyond the official checks (docs/differences.md); they do not change a "
          "status. Warnings that differ only in numbers are counted together.", "",
          md_table(warnings) if len(warnings) else "No entry raised a warning.", "",
          "## Provenance per entry", "", md_table(provenance_table(g, facts)), ""]
    return "\n".join(md) + "\n"


def _plot(table, path, title, footer):
    """Mean latency per bucket, one line per entry, on a log axis; an entry without a PASSED workload is left
    out, and a plot where no entry passed says so."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = [c for c in table.columns if c.endswith(" mean us")]
    fig, ax = plt.subplots(figsize=(10, 5))
    labels = dict(ylabel="mean latency over PASSED workloads (us)", title=f"{title}: latency per bucket")
    for r in table.itertuples():
        y = on_log_axis(table.loc[r.Index, cols].astype(float))
        if y is None:
            continue
        style = dict(lw=3, ms=8, color="black", zorder=3) if r.ours else dict(lw=1.2, ms=4, alpha=0.8)
        ax.plot(range(len(cols)), y, "o-", label=f"{r.rank}. {r.solution}" + (" (ours)" if r.ours else ""), **style)
    if ax.lines:
        ax.set_xticks(range(len(cols)), [c.removesuffix(" mean us") for c in cols])
        ax.set(yscale="log", **labels)
    else:
        nothing_to_plot(ax, "no latency to plot: no entry passed a workload", **labels)
    finish(ax)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.text(0.01, 0.01, textwrap.fill(footer, 190), fontsize=6, color="dimgray")
    fig.savefig(path, dpi=110)
    plt.close(fig)
