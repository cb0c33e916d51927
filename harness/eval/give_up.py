"""Giving up on a solution that keeps timing out (the public run's --give-up-after N): once a solution has timed
out on N workloads, its pairs on workloads at least as large as those are not run. A pair's cost grows with its
inputs, so they would time out too, each after the full --timeout (an entry 1000x slower than ours would hold a
GPU for hours). They get no trace (nothing was measured); the run lists them with the reason."""
import math

from harness.data.trace import Status
from harness.eval.traces import kept_traces


def input_elements(definition, workload):
    """The workload's input size: elements over all input tensors (a scalar counts 1); a pair's cost grows with it."""
    axes = definition.axis_values(workload.axes)
    return sum(math.prod(definition.shape_of(spec, axes) or [1]) for spec in definition.inputs.values())


def earlier_timeouts(out_dir, solutions, definition):
    """{solution name: [input sizes]} of the TIMEOUT traces a resumed run keeps in out_dir."""
    out = {}
    for tr in kept_traces(out_dir, solutions, definition):
        if tr.evaluation.status == Status.TIMEOUT:
            out.setdefault(tr.solution, []).append(input_elements(definition, tr.workload))
    return out


class GiveUp:
    """`after`: timeouts before giving up; `earlier`: {solution name: [input sizes of its TIMEOUT traces]} of the
    pairs a resumed run keeps. The run's own results are read from `results` (PairResults, as they arrive)."""

    def __init__(self, definition, after, results, earlier=None):
        self.definition, self.after, self.results, self.earlier = definition, after, results, earlier or {}
        self.sizes = {}   # workload uuid -> input_elements

    def size(self, workload):
        if workload.uuid not in self.sizes:
            self.sizes[workload.uuid] = input_elements(self.definition, workload)
        return self.sizes[workload.uuid]

    def why(self, solution, workload):
        """The reason `solution` is not run on `workload`, or None to run it."""
        size = self.size(workload)
        sizes = list(self.earlier.get(solution.name, []))
        sizes += [self.size(r.workload) for r in self.results
                  if r.solution.name == solution.name and r.trace is not None
                  and r.trace.evaluation.status == Status.TIMEOUT]
        smaller = [s for s in sizes if s <= size]
        if len(smaller) < self.after:
            return None
        return (f"not run: it timed out on {len(smaller)} workload(s) with no larger inputs "
                f"(--give-up-after {self.after})")
