"""Giving up on a solution too slow to finish (the public run's --give-up-after N and --entry-budget SECONDS).
A pair's cost grows with its inputs, and the public run goes smallest first, so an entry 1000x slower than ours
would otherwise hold a GPU for hours on the larger rest. Two rules, each off when unset:
- after N timeouts, a solution's pairs on workloads at least as large as those are not run (they would time out
  too, each after the full --timeout);
- once a solution's pairs have spent SECONDS in the official timer (a timed-out pair counts its wall time), its
  remaining pairs are not run.
Pairs given up on get no trace (nothing was measured); the run lists them with the reason."""
import math
from dataclasses import dataclass
from pathlib import Path

from harness.data.dataset import extras_path, read_jsonl
from harness.data.trace import Status
from harness.eval.record import NOT_RUN
from harness.eval.traces import kept_traces


@dataclass(frozen=True)
class GiveUpRule:
    after: int | None = None          # timeouts before giving up on workloads no smaller
    budget_s: float | None = None     # seconds in the official timer, over the solution's pairs

    def differences(self):
        """The printed deliberate differences (officially every pair runs)."""
        notes = []
        if self.after:
            notes.append(f"a solution that timed out on {self.after} workload(s) is not run on workloads with no "
                         "smaller inputs (--give-up-after; officially every pair runs): those pairs get no trace")
        if self.budget_s:
            notes.append(f"a solution whose pairs spent {self.budget_s:g} s in the timer is not run on the rest "
                         "(--entry-budget; officially every pair runs): those pairs get no trace")
        return notes


def input_elements(definition, workload):
    """The workload's input size: elements over all input tensors (a scalar counts 1); a pair's cost grows with it."""
    axes = definition.axis_values(workload.axes)
    return sum(math.prod(definition.shape_of(spec, axes) or [1]) for spec in definition.inputs.values())


def spent_s(phases, wall_s):
    """A pair's seconds against --entry-budget: inside the timer, or its whole wall time when the child reported
    no phases (it timed out or crashed)."""
    return phases["timing_s"] if "timing_s" in phases else wall_s


@dataclass
class Earlier:
    """What a resumed run keeps: per solution, the input sizes of its TIMEOUT traces and its seconds spent."""
    timeouts: dict
    spent: dict


def earlier(out_dir, solutions, definition, run):
    """Earlier of the traces (and their extras lines) a resumed run keeps in out_dir (traces.kept_traces: RunKey
    `run`)."""
    timeouts, spent = {}, {}
    kept = set()
    for tr in kept_traces(out_dir, solutions, definition, run):
        kept.add((tr.solution, tr.workload.uuid))
        if tr.evaluation.status == Status.TIMEOUT:
            timeouts.setdefault(tr.solution, []).append(input_elements(definition, tr.workload))
    ep = extras_path(Path(out_dir), definition.name)
    for _, e in read_jsonl(ep, allow_partial_tail=True) if ep.exists() else []:
        if (e.get("solution"), e.get("workload")) in kept and e.get("status") != NOT_RUN and "wall_s" in e:
            spent[e["solution"]] = spent.get(e["solution"], 0.0) + spent_s(e.get("child_phases") or {}, e["wall_s"])
    return Earlier(timeouts, spent)


class GiveUp:
    """`rule`: a GiveUpRule; `before`: an Earlier (what a resumed run keeps). The run's own results are read from
    `results` (PairResults, as they arrive)."""

    def __init__(self, definition, rule, results, before=None):
        self.definition, self.rule, self.results = definition, rule, results
        self.before = before or Earlier({}, {})
        self.sizes = {}   # workload uuid -> input_elements

    def size(self, workload):
        if workload.uuid not in self.sizes:
            self.sizes[workload.uuid] = input_elements(self.definition, workload)
        return self.sizes[workload.uuid]

    def why(self, solution, workload):
        """The reason `solution` is not run on `workload`, or None to run it."""
        # this run's own traces (the kept ones are in self.before)
        mine = [r for r in self.results if r.solution.name == solution.name and r.trace is not None and not r.skipped]
        if self.rule.after:
            size = self.size(workload)
            sizes = list(self.before.timeouts.get(solution.name, []))
            sizes += [self.size(r.workload) for r in mine if r.trace.evaluation.status == Status.TIMEOUT]
            smaller = [s for s in sizes if s <= size]
            if len(smaller) >= self.rule.after:
                return (f"not run: it timed out on {len(smaller)} workload(s) with no larger inputs "
                        f"(--give-up-after {self.rule.after})")
        if self.rule.budget_s:
            spent = self.before.spent.get(solution.name, 0.0)
            spent += sum(spent_s(r.cost.phases, r.cost.wall_s) for r in mine if r.cost is not None)
            if spent >= self.rule.budget_s:
                return f"not run: its pairs had spent {self.rule.budget_s:g} s or more in the timer (--entry-budget)"
        return None
