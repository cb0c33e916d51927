"""One pair's result, written by the process that drives the run as soon as it arrives (wherever the pair ran:
this host's children or a Ray actor): the official trace in traces/ and the extras line in harness/."""
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from harness.data.dataset import append_jsonl, append_trace, extras_path, trace_path
from harness.data.trace import Environment, Status, Trace
from harness.eval import environment
from harness.eval.costs import PairCost, calls_per_pair
from harness.eval.traces import eval_settings, make_trace, solution_digest


NOT_RUN = "NOT_RUN"   # the extras status of a pair given up on; never a trace's


@dataclass
class PairResult:
    workload: object
    solution: object
    trace: Trace
    warnings: list = field(default_factory=list)
    skipped: bool = False             # not evaluated: kept from an earlier run (trace: the kept one), or not run
    not_run: str | None = None        # why it was not run (harness/eval/give_up.py); no trace
    trace_file: Path | None = None
    cost: PairCost | None = None


@dataclass
class Prepared:
    """What a workload's pairs share, made once by the driver: input provenance, reference latency, seconds spent."""
    workload: object
    provenance: dict
    ref_ms: float | None
    prepare_s: float                  # inputs, reference outputs and reference timing (reference_s)
    reference_s: float
    parallel_prepare_s: float | None  # the workload's payload made before the loop, in a preparer process


@dataclass
class Pair:
    prepared: Prepared
    solution: object
    job: object                       # harness.eval.child.Job


@dataclass
class Ran:
    """What running a pair gave, and where it ran."""
    outcome: dict
    log: str
    wall_s: float
    host: dict                        # host_of() of the machine that ran it
    ran_on: str | None = None         # on Ray: the actor's node and GPU (None: this process's children)


def host_of(device):
    """The trace's environment fields of this machine."""
    return {"hardware": environment.hardware(device), "libs": dict(environment.libs(device))}


class Recorder:
    """Writes each pair's trace and extras line and keeps its PairResult (in arrival order) in `results`."""

    def __init__(self, definition, opts, ref_timing_label, bar, results):
        self.definition, self.opts, self.label = definition, opts, ref_timing_label
        self.bar, self.results = bar, results
        # names this run in every extras line: which solutions ran interleaved (report/compare.solution_runs)
        self.run = datetime.now().isoformat(timespec="microseconds")

    def skipped(self, workload, solution, kept):
        """A pair a resumed run keeps: `kept`, its trace from an earlier run, stands for it."""
        where = trace_path(Path(self.opts.out_dir), solution.author, self.definition.op_type, self.definition.name)
        self.results.append(PairResult(workload, solution, kept, skipped=True, trace_file=where))
        self.bar.update(1)

    def not_run(self, workload, solution, why):
        """A pair given up on: no trace (nothing was measured), an extras line with the reason."""
        append_jsonl(extras_path(Path(self.opts.out_dir), self.definition.name), {
            "solution": solution.name, "author": solution.author, "workload": workload.uuid,
            "solution_digest": solution_digest(solution), "status": NOT_RUN, "reason": why, "run": self.run})
        self.results.append(PairResult(workload, solution, None, skipped=True, not_run=why))
        self.bar.update(1)

    def rejected(self, pair, problem):
        """A solution whose sources cannot build: COMPILE_ERROR with the reason, no child started."""
        self.record(pair, Ran({"status": Status.COMPILE_ERROR.value, "message": problem}, "", 0.0,
                              host_of(self.opts.device)))

    def record(self, pair, ran):
        definition, opts, prep, sol, outcome = self.definition, self.opts, pair.prepared, pair.solution, ran.outcome
        out_dir = Path(opts.out_dir)
        libs = dict(ran.host["libs"])
        libs["inputs"] = prep.provenance["inputs"]
        libs["input_digest"] = prep.provenance["digest"]
        libs["solution_digest"] = solution_digest(sol)
        libs["eval_settings"] = eval_settings(opts, pair.job.timing)
        if outcome.get("timer"):
            libs["timer"] = outcome["timer"]
        env = Environment(ran.host["hardware"], libs)
        trace = make_trace(definition, prep.workload, sol, outcome, ran.log, prep.ref_ms, env)
        trace_file = trace_path(out_dir, sol.author, definition.op_type, definition.name)
        append_trace(trace_file, trace)
        append_jsonl(extras_path(out_dir, definition.name), {
            "solution": sol.name, "author": sol.author, "workload": prep.workload.uuid,
            "solution_digest": libs["solution_digest"],
            "status": outcome["status"], "latency_ms": outcome.get("latency_ms"),
            "event_ms": outcome.get("event_ms"), "timer": outcome.get("timer"),
            "reference_latency_ms": prep.ref_ms,
            "reference_timing": self.label if prep.ref_ms is not None else "not timed",
            "inputs": prep.provenance["inputs"], "warnings": outcome.get("warnings", []),
            "wall_s": round(ran.wall_s, 3), "prepare_s": round(prep.prepare_s, 3),
            "reference_s": round(prep.reference_s, 3), "child_phases": outcome.get("phases", {}),
            "parallel_prepare_s": (round(prep.parallel_prepare_s, 3) if prep.parallel_prepare_s is not None
                                   else None),
            "run": self.run, **({"ran_on": ran.ran_on} if ran.ran_on else {})})
        timing = pair.job.timing
        cost = PairCost(ran.wall_s, outcome.get("phases", {}), outcome.get("latency_ms"),
                        calls_per_pair(timing, timing.trials))
        res = PairResult(prep.workload, sol, trace, outcome.get("warnings", []), trace_file=trace_file, cost=cost)
        self.results.append(res)
        self.bar.update(1)
        self.bar.set_postfix_str(f"{sol.name}: {outcome['status']}", refresh=sys.stderr.isatty())
        return res
