"""What a run spends per pair, for the run record (runs.jsonl): wall time, the child's phases, and the harness's
own overhead, i.e. the pair's wall time less the GPU time of the solution's calls."""
import statistics
from dataclasses import dataclass

PHASES = ("build", "load", "check", "timing", "fresh")


@dataclass(frozen=True)
class PairCost:
    wall_s: float
    phases: dict            # {"build_s": ..., ...} as the child reported them (empty for a crashed child)
    latency_ms: float | None
    calls: int              # how many calls of the solution the pair made (calls_per_pair)


def calls_per_pair(timing, correctness_trials):
    """Calls of the solution in one PASSED pair: one per correctness trial; per timing trial FlashInfer's CUPTI timer
    makes 1 + 5 estimating calls, `warmup` dry runs and `iters` timed ones; after the trials the harness makes `iters`
    back-to-back event-timed ones per trial, then three (fresh inputs, the host-sync probe's two)."""
    return timing.trials * (6 + timing.warmup + 2 * timing.iters) + correctness_trials + 3


def summarize(costs):
    """Medians and totals over the pairs: {pairs, wall_s_total, wall_s_median, overhead_s_median,
    overhead_s_total, <phase>_s_median...}. Overhead counts only pairs with a latency (PASSED)."""
    if not costs:
        return {"pairs": 0}
    walls = [c.wall_s for c in costs]
    out = {"pairs": len(costs), "wall_s_total": round(sum(walls), 3),
           "wall_s_median": round(statistics.median(walls), 4)}
    timed = [c for c in costs if c.latency_ms is not None]
    if timed:
        over = [max(0.0, c.wall_s - c.latency_ms * 1e-3 * c.calls) for c in timed]
        out.update(overhead_s_median=round(statistics.median(over), 4), overhead_s_total=round(sum(over), 3))
    for phase in PHASES:
        seen = [c.phases[f"{phase}_s"] for c in costs if f"{phase}_s" in c.phases]
        if seen:
            out[f"{phase}_s_median"] = round(statistics.median(seen), 4)
    return out
