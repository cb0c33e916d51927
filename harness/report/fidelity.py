"""How far two runs of the same solutions, workloads and inputs are from each other (the harness against
FlashInfer-Bench's own run, or the harness on Ray against the harness locally): verdict agreement, bitwise-equal max
errors, and latency ratios per workload and by size, set against the spread of the second run against itself (that
run made again) when one is given. Both tools write traces in the official layout
(<folder>/traces/<author>/<op_type>/<definition>.jsonl), so any two runs can be paired."""
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.report.compare import bucket_of, bucket_order
from harness.report.markdown import md_table
from harness.report.provenance import timers
from harness.report.rows import load_all_traces, load_rows, wall_clock
from harness.report.summary import summarize

KEY = ["definition", "solution", "uuid"]


def paired(rows_a, rows_b, suffixes=("_a", "_b")):
    """The pairs (definition, solution, workload) traced in both runs, side by side, with the latency ratio a / b
    and the reference latency ratio a / b (NaN where either run did not time the reference)."""
    cols = [*KEY, "status", "latency_us", "reference_us", "max_abs_error", "max_rel_error"]
    a, b = rows_a[cols + ["bucket"]], rows_b[cols]
    both = a.merge(b, on=KEY, suffixes=suffixes)
    sa, sb = suffixes
    both["ratio"] = both[f"latency_us{sa}"] / both[f"latency_us{sb}"]
    both["reference_ratio"] = both[f"reference_us{sa}"] / both[f"reference_us{sb}"]
    return both


def one_sided(rows_a, rows_b, names):
    """The pairs traced in one of two runs only (a run that failed to run a workload leaves no trace for it), with
    the run that has each and the one that lacks it: [*KEY, has, lacks]."""
    a, b = rows_a[KEY].drop_duplicates(), rows_b[KEY].drop_duplicates()
    both = a.merge(b, on=KEY, how="outer", indicator=True)
    out = both[both._merge != "both"].copy()
    out["has"] = out._merge.map({"left_only": names[0], "right_only": names[1]})
    out["lacks"] = out._merge.map({"left_only": names[1], "right_only": names[0]})
    return out[[*KEY, "has", "lacks"]].reset_index(drop=True)


def agreement(pairs, noise=None):
    """Per (definition, solution): pairs, verdicts equal, max errors bitwise equal (of the pairs with errors on both
    sides: PASSED or INCORRECT_NUMERICAL), latency ratio median / min / max, the reference latency ratio where both
    timed it, and with `noise` (paired() of run b again against run b) that run's ratio median / min / max, the
    share of workloads whose ratio lies inside its range for the same solution, and the share expected if run a were
    run b made once more: a draw lands inside the range of k others from its own distribution with chance
    (k - 1) / (k + 1)."""
    out = []
    for (definition, solution), g in pairs.groupby(["definition", "solution"], sort=False):
        passed = g[(g.status_a == "PASSED") & (g.status_b == "PASSED")]
        checked = g[g.max_abs_error_a.notna() & g.max_abs_error_b.notna()]
        row = {"definition": definition, "solution": solution, "pairs": len(g),
               "verdicts_equal": int((g.status_a == g.status_b).sum()), "errors_compared": len(checked),
               "errors_bitwise_equal": int(((checked.max_abs_error_a == checked.max_abs_error_b)
                                            & (checked.max_rel_error_a == checked.max_rel_error_b)).sum()),
               "both_passed": len(passed), "ratio_median": passed.ratio.median(),
               "ratio_min": passed.ratio.min(), "ratio_max": passed.ratio.max()}
        refs = g.reference_ratio.dropna()
        if len(refs):   # both runs timed the reference of these workloads
            row.update(reference_pairs=len(refs), reference_ratio_median=refs.median(),
                       reference_ratio_min=refs.min(), reference_ratio_max=refs.max())
        if noise is not None:
            mine = noise[(noise.definition == definition) & (noise.solution == solution)]
            row["noise_pairs"] = len(mine)
            own = mine.ratio.dropna()
            if len(own):
                lo, hi = own.min(), own.max()
                row.update(noise_median=own.median(), noise_min=lo, noise_max=hi,
                           within_noise=float(passed.ratio.between(lo, hi).mean()) if len(passed) else float("nan"),
                           within_noise_if_same=(len(own) - 1) / (len(own) + 1))
        out.append(row)
    return pd.DataFrame(out)


def by_bucket(pairs):
    """Median latency ratio per (definition, solution, batch size or T bucket), buckets in order."""
    passed = pairs[(pairs.status_a == "PASSED") & (pairs.status_b == "PASSED")]
    table = passed.pivot_table(index=["definition", "solution"], columns="bucket", values="ratio", aggfunc="median")
    return table[bucket_order(table.columns)].reset_index()


def scores(runs, names, definitions):
    """Per (definition, solution) and run: the harness's score (mean speedup vs the baseline over the last trace
    per pair, 0 unless all pass) and FIB's official one (over every trace; any failure: 0), side by side."""
    cols = ["definition", "solution", "mean_speedup_vs_baseline", "official_score_vs_baseline"]
    out = None
    for folder, name in zip((runs.a, runs.b), names):
        s = summarize(load_rows([folder], definitions), load_all_traces([folder], definitions))[cols]
        s = s.rename(columns={"mean_speedup_vs_baseline": f"harness_rule {name}",
                              "official_score_vs_baseline": f"official_rule {name}"})
        out = s if out is None else out.merge(s, on=["definition", "solution"], how="outer")
    return out


def load(folder, definitions):
    rows = load_rows([folder], definitions)
    if rows.empty:
        raise ValueError(f"{folder}: no traces of {[d.name for d in definitions]}")
    return rows.assign(bucket=rows.apply(bucket_of, axis=1))


@dataclass(frozen=True)
class Runs:
    """The two runs to pair (output folders or dataset roots holding traces/), and optionally run b again."""
    a: str
    b: str
    b_again: str | None = None


def write_agreement(out_dir, definitions, runs, names, stem, title=None):
    """<out_dir>/<stem>.md, <stem>.csv and <stem>_pairs.csv: run a against run b (ratio a / b), and b's second run
    against its first as the noise floor. `names` labels (a, b) in the Markdown. Returns the agreement table and the
    count of pairs traced in one run only (listed in the Markdown)."""
    a_name, b_name = names
    out = Path(out_dir)
    a, b = load(runs.a, definitions), load(runs.b, definitions)
    again = load(runs.b_again, definitions) if runs.b_again else None
    pairs = paired(a, b)
    if pairs.empty:   # nothing to set side by side: no figure, no file
        count = lambda rows: len(rows[KEY].drop_duplicates())  # noqa: E731
        raise ValueError(f"no (solution, workload) pair in common between {runs.a} ({count(a)} pair(s)) and "
                         f"{runs.b} ({count(b)} pair(s)): nothing to compare (same solution names and workload "
                         "uuids are needed)")
    noise = paired(again, b) if again is not None else None
    out.mkdir(parents=True, exist_ok=True)
    table = agreement(pairs, noise)
    lone = one_sided(a, b, names)
    if again is not None:
        lone = pd.concat([lone, one_sided(b, again, (b_name, f"{b_name} again"))], ignore_index=True)
    counts = lone.groupby(["definition", "solution"]).size().rename("unpaired").reset_index()
    table = table.merge(counts, on=["definition", "solution"], how="left").fillna({"unpaired": 0})
    table["unpaired"] = table.unpaired.astype(int)
    buckets = by_bucket(pairs)
    score = scores(runs, names, definitions)
    pairs.to_csv(out / f"{stem}_pairs.csv", index=False)
    table.to_csv(out / f"{stem}.csv", index=False)
    score.to_csv(out / f"{stem}_scores.csv", index=False)
    md = [f"# {title or f'{a_name} against {b_name}'}", "",
          f"{a_name[:1].upper() + a_name[1:]} run: `{runs.a}`; {b_name} run: `{runs.b}`"
          + (f"; {b_name} again (noise floor): `{runs.b_again}`" if runs.b_again else
             f"; no second {b_name} run was given, so there is no noise floor") + ".", "",
          f"Ratios are {a_name} latency / {b_name} latency, over the pairs PASSED in both runs. "
          "`errors_bitwise_equal` counts, of the `errors_compared` pairs with max errors on both sides (PASSED or "
          "INCORRECT_NUMERICAL), those whose max absolute and relative errors are equal to the bit."
          + (f" `within_noise`: the share of workloads whose ratio lies inside the min-max range of {b_name} again "
             f"against {b_name}; `within_noise_if_same`: the share expected were the {a_name} run one more "
             f"{b_name} run ((k - 1) / (k + 1) for k noise pairs)." if runs.b_again else ""), "",
          "## Agreement", "", md_table(table, ".4f"), "",
          "## Median ratio by batch size / T bucket", "", md_table(buckets, ".4f"), "",
          "## Scores vs the FlashInfer baseline, both rules", "",
          "harness_rule: mean speedup over the last trace per pair, 0 unless every pair passed; official_rule: "
          "FlashInfer-Bench's own (best PASSED trace per workload; any trace not PASSED makes it 0).", "",
          md_table(score, ".4f"), ""]
    differ = pairs[pairs.status_a != pairs.status_b]
    md += ["## Verdicts that differ", ""]
    md += [f"- {r.definition} {r.solution} {r.uuid}: {a_name} {r.status_a}, {b_name} {r.status_b}"
           for r in differ.itertuples()] or ["- none"]
    md += ["", "## Pairs traced in one run only", "", "Not in the figures above (`unpaired` counts them).", ""]
    md += [f"- {r.definition} {r.solution} {r.uuid}: in {r.has}, not in {r.lacks}" for r in lone.itertuples()] \
        or ["- none"]
    cautions = run_cautions({a_name: a, b_name: b, **({f"{b_name} again": again} if again is not None else {})})
    for caution in cautions:
        print(f"warning: {caution}")
    for caution in reversed(cautions):   # under the title
        md[2:2] = [f"**{caution[:1].upper()}{caution[1:]}.**", ""]
    (out / f"{stem}.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return table, len(lone)


def run_cautions(runs):
    """What makes the latency ratios of these runs ({label: rows}) no like-for-like figure: a CPU wall-clock run, or
    runs on other hardware or with other timers (traces that name no timer, as FlashInfer-Bench's, are not judged)."""
    said = []
    cpu = [label for label, rows in runs.items() if wall_clock(rows).any()]
    if cpu:
        said.append(f"timed with the CPU wall clock ({', '.join(cpu)}): these ratios say nothing about a GPU")
    for what, values in (("hardware", lambda rows: sorted(set(rows.hardware))),
                         ("timer", lambda rows: [t for t in timers(rows) if t != "?"])):
        seen = {label: values(rows) for label, rows in runs.items() if values(rows)}
        if len({tuple(v) for v in seen.values()}) > 1:
            each = "; ".join(f"{label}: {', '.join(v)}" for label, v in seen.items())
            said.append(f"the runs differ in {what} ({each}): the ratios carry that difference")
    return said


FIDELITY_NAMES = ("harness", "FlashInfer-Bench")
FIDELITY_TITLE = "The harness against FlashInfer-Bench"
