"""How far the harness's verdicts and latencies are from FlashInfer-Bench's own, on the same solutions, workloads and
inputs: verdict agreement, bitwise-equal max errors, and latency ratios per workload and by size, set against the
spread of FlashInfer-Bench against itself (a second run of it) when one is given. Both tools write traces in the
official layout (<folder>/traces/<author>/<op_type>/<definition>.jsonl), so any two runs can be paired."""
from pathlib import Path

import pandas as pd

from harness.report.compare import bucket_of, bucket_order
from harness.report.summary import _md_table, load_rows

KEY = ["definition", "solution", "uuid"]


def paired(rows_a, rows_b, suffixes=("_a", "_b")):
    """The pairs (definition, solution, workload) traced in both runs, side by side, with the latency ratio a / b."""
    cols = [*KEY, "status", "latency_us", "max_abs_error", "max_rel_error"]
    a, b = rows_a[cols + ["bucket"]], rows_b[cols]
    both = a.merge(b, on=KEY, suffixes=suffixes)
    sa, sb = suffixes
    both["ratio"] = both[f"latency_us{sa}"] / both[f"latency_us{sb}"]
    return both


def agreement(pairs, noise=None):
    """Per (definition, solution): pairs, verdicts equal, max errors bitwise equal (pairs PASSED on both sides),
    latency ratio median / min / max, and with `noise` (paired() of the reference tool against itself) the share of
    workloads whose ratio lies inside that run's range of ratios for the same solution."""
    out = []
    for (definition, solution), g in pairs.groupby(["definition", "solution"], sort=False):
        passed = g[(g.status_a == "PASSED") & (g.status_b == "PASSED")]
        row = {"definition": definition, "solution": solution, "pairs": len(g),
               "verdicts_equal": int((g.status_a == g.status_b).sum()),
               "errors_bitwise_equal": int(((passed.max_abs_error_a == passed.max_abs_error_b)
                                            & (passed.max_rel_error_a == passed.max_rel_error_b)).sum()),
               "both_passed": len(passed), "ratio_median": passed.ratio.median(),
               "ratio_min": passed.ratio.min(), "ratio_max": passed.ratio.max()}
        if noise is not None:
            own = noise[(noise.definition == definition) & (noise.solution == solution)].ratio.dropna()
            if len(own):
                lo, hi = own.min(), own.max()
                row.update(noise_min=lo, noise_max=hi,
                           within_noise=float(passed.ratio.between(lo, hi).mean()) if len(passed) else float("nan"))
        out.append(row)
    return pd.DataFrame(out)


def by_bucket(pairs):
    """Median latency ratio per (definition, solution, batch size or T bucket), buckets in order."""
    passed = pairs[(pairs.status_a == "PASSED") & (pairs.status_b == "PASSED")]
    table = passed.pivot_table(index=["definition", "solution"], columns="bucket", values="ratio", aggfunc="median")
    return table[bucket_order(table.columns)].reset_index()


def load(folder, definitions):
    rows = load_rows([folder], definitions)
    if rows.empty:
        raise ValueError(f"{folder}: no traces of {[d.name for d in definitions]}")
    return rows.assign(bucket=rows.apply(bucket_of, axis=1))


def write_fidelity(out_dir, definitions, harness_dir, fib_dir, fib_again_dir=None):
    """<out_dir>/fidelity.md and .csv: the harness's run against FlashInfer-Bench's (ratio harness / FIB), and
    FIB's second run against its first as the noise floor. Returns the agreement table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fib = load(fib_dir, definitions)
    pairs = paired(load(harness_dir, definitions), fib)
    noise = paired(load(fib_again_dir, definitions), fib) if fib_again_dir else None
    table = agreement(pairs, noise)
    buckets = by_bucket(pairs)
    pairs.to_csv(out / "fidelity_pairs.csv", index=False)
    table.to_csv(out / "fidelity.csv", index=False)
    md = ["# The harness against FlashInfer-Bench", "",
          f"Harness run: `{harness_dir}`; FlashInfer-Bench run: `{fib_dir}`"
          + (f"; FlashInfer-Bench again (noise floor): `{fib_again_dir}`" if fib_again_dir else
             "; no second FlashInfer-Bench run was given, so there is no noise floor") + ".", "",
          "Ratios are harness latency / FlashInfer-Bench latency, over the pairs PASSED in both runs. "
          "`errors_bitwise_equal` counts those pairs whose max absolute and relative errors are equal to the bit.", "",
          "## Agreement", "", _md_table(table, ".4f"), "",
          "## Median ratio by batch size / T bucket", "", _md_table(buckets, ".4f"), ""]
    differ = pairs[pairs.status_a != pairs.status_b]
    md += ["## Verdicts that differ", ""]
    md += [f"- {r.definition} {r.solution} {r.uuid}: harness {r.status_a}, FlashInfer-Bench {r.status_b}"
           for r in differ.itertuples()] or ["- none"]
    (out / "fidelity.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return table
