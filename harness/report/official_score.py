"""FlashInfer-Bench's own score rule (TraceSet.get_solution_score / get_author_score) over every trace, and the
contest's track formula: the official_* columns beside the harness's figures."""
import math

import pandas as pd

from harness.eval.timing import CPU_LABEL
from harness.report.rows import BASELINE_AUTHOR

GDN_TRACK_DEFINITIONS = 2   # the contest's expected kernel count for the GDN track (decode and prefill)

OFFICIAL_COLUMNS = ["official_score_vs_baseline", "official_win_rate_vs_baseline", "official_workloads", "traces",
                    "official_note"]

OFFICIAL_SENTENCE = (
    "The official_* columns follow FlashInfer-Bench's own rule (TraceSet.get_solution_score / get_author_score) "
    "over every trace of each solution, where the harness's figures use only the last trace per workload: per "
    "workload the lowest latency among the PASSED traces of the solution and of the baseline, a 0 score and win "
    "rate when any trace of the solution, even an earlier one, did not pass, no score for the baseline itself, "
    "and official_track_score = the sum of the author's best official score per definition / "
    f"{GDN_TRACK_DEFINITIONS} (the contest's avg_speedup * definitions / {GDN_TRACK_DEFINITIONS}).")


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


def official_track(g):
    """One author's official figures from its summary rows (summary.track_scores)."""
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
