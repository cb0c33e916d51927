"""Evaluate one (workload, solution) pair: build, call per trial, check, then time.

This is what runs inside the isolated child process (harness/eval/pool.py). It receives plain data
(JSON dicts and the path of a payload file holding the trial inputs and reference outputs) and
returns a plain dict, so nothing of the solution's objects crosses the process boundary."""
import time
import traceback
from dataclasses import dataclass, field

import torch

from harness.build.builders import BuildError, build, check_signature
from harness.eval.correctness import Tolerance, check_output, merge_max, normalize_outputs
from harness.data.definition import Definition
from harness.eval.inputs import allocate_outputs, torch_dtype
from harness.data.solution import Solution
from harness.data.trace import Status
from harness.data.workload import Workload
from harness.eval.traces import now


@dataclass(frozen=True)
class TimingConfig:
    warmup: int
    iters: int
    trials: int


OFFICIAL_TIMING = {"decode": TimingConfig(10, 50, 3), "prefill": TimingConfig(1, 5, 3)}
DEFAULT_TIMING = TimingConfig(10, 50, 3)


def official_timing(definition_name):
    for key, cfg in OFFICIAL_TIMING.items():
        if key in definition_name:
            return cfg
    return DEFAULT_TIMING


@dataclass
class Job:
    definition: dict
    solution: dict
    workload: dict
    payload_path: str
    device: str
    tolerance: Tolerance = Tolerance()
    timing: TimingConfig = DEFAULT_TIMING
    timer: str = "auto"             # see harness/eval/timing.py
    profile: bool = True            # time the solution once correct
    strict: bool = False            # a wrong answer on fresh inputs after timing fails the pair


@dataclass
class Outcome:
    status: str
    message: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    latency_ms: float | None = None
    event_ms: float | None = None
    timer: str | None = None
    warnings: list = field(default_factory=list)
    phases: dict = field(default_factory=dict)   # seconds the child spent per phase (Phases.done)
    timestamp: str | None = None                 # when the child finished, as officially (None: the parent's)

    def to_dict(self):
        return dict(self.__dict__)


class Phases:
    """Wall time per phase of a job (build, load, check, timing, fresh), for the run's own cost report: what
    the harness spends around the solution's calls."""

    def __init__(self):
        self.seconds, self._t = {}, time.perf_counter()

    def mark(self, name):
        now = time.perf_counter()
        self.seconds[f"{name}_s"] = round(now - self._t, 4)
        self._t = now

    def done(self, outcome):
        outcome.phases = dict(self.seconds)
        return outcome


def _to_device(values, device):
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _snapshot(values):
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]


def _same(a, b):
    """Bitwise-equal values, NaN equal to NaN (a NaN left in place is not a change)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def _changed_inputs(names, before, after):
    return [name for name, b, a in zip(names, before, after) if isinstance(b, torch.Tensor) and not _same(b, a)]


def poison(outputs):
    """Fill freshly allocated DPS outputs with NaN (integers: their max) so a solution that never writes
    them cannot pass on whatever the allocator hands back, e.g. a previous trial's correct answer."""
    for o in outputs:
        o.fill_(float("nan") if o.is_floating_point() else torch.iinfo(o.dtype).max if o.dtype != torch.bool else 1)
    return outputs


def call_solution(fn, inputs, definition, workload, device, dps, outputs=None):
    """One call in the official convention. Returns the outputs as a list."""
    if dps:
        outputs = outputs if outputs is not None else poison(allocate_outputs(definition, workload, device))
        fn(*inputs, *outputs)
        return outputs
    return normalize_outputs(fn(*inputs), list(definition.outputs),
                             [torch_dtype(s.dtype) for s in definition.outputs.values()], device)


def run_job(job):
    """Build, check correctness over all trials, then time. Never raises for solution faults.

    As officially: the child clones the trial inputs once; the same clones feed the correctness calls
    and then the timing calls."""
    phases = Phases()
    outcome = phases.done(_run_job(job, phases))
    outcome.timestamp = now()
    return outcome


def _run_job(job, phases):
    definition = Definition.from_json(job.definition, "<job definition>")
    solution = Solution.from_json(job.solution, "<job solution>")
    workload = Workload.from_json(job.workload, "<job workload>")
    dps = solution.spec.destination_passing_style
    try:
        fn = build(solution)
        problem = check_signature(fn, len(definition.inputs), len(definition.outputs), dps)
        if problem:
            raise BuildError(problem)
    except BuildError as exc:
        print(f"Build error: BuildError: {exc}\n\nTraceback:\n{traceback.format_exc()}", flush=True)
        phases.mark("build")
        return Outcome(Status.COMPILE_ERROR.value)
    phases.mark("build")

    # mmap: the tensors are read from the page cache straight into their device copies
    payload = torch.load(job.payload_path, map_location="cpu", weights_only=False, mmap=True)
    trial_inputs = [_clone_to(inputs, job.device) for inputs in payload["inputs"]]
    phases.mark("load")
    # Each phase is a function of its own, so that what it allocated is freed when it returns: the timed calls
    # then run beside what FlashInfer-Bench's would (the trial inputs, the trial's outputs, the L2 flush buffer).
    outcome = _check_trials(fn, trial_inputs, payload["outputs"], definition, workload, job, dps)
    phases.mark("check")
    if outcome.status != Status.PASSED.value:
        return outcome
    timed = None   # the last timed call's (inputs, outputs)
    if job.profile:
        try:
            timed = _time_trials(fn, trial_inputs, definition, workload, job, dps, outcome)
        except Exception:
            traceback.print_exc()
            return Outcome(Status.RUNTIME_ERROR.value, warnings=outcome.warnings)
        phases.mark("timing")
        if outcome.latency_ms == 0.0:   # officially the speedup's division raises in the child: RUNTIME_ERROR
            print("ZeroDivisionError: float division by zero (the measured latency is 0)", flush=True)
            return Outcome(Status.RUNTIME_ERROR.value, warnings=outcome.warnings)
    if payload.get("fresh"):
        inputs, outputs = timed or (trial_inputs[0], None)
        problem = _fresh_check(fn, inputs, outputs, payload["fresh"], definition, workload, job, dps,
                               outcome.warnings)
        if problem and job.strict:
            return Outcome(Status.INCORRECT_NUMERICAL.value, f"strict mode: {problem}", outcome.max_abs,
                           outcome.max_rel, warnings=outcome.warnings)
        if problem:
            outcome.warnings.append(problem)
        phases.mark("fresh")
    return outcome


def _check_trials(fn, trial_inputs, trial_refs, definition, workload, job, dps):
    """One call per trial, each checked against its reference outputs: the pair's Outcome (PASSED, with the max
    errors and the warnings, or the first failure)."""
    cuda = job.device.startswith("cuda")
    names_in, names_out = list(definition.inputs), list(definition.outputs)
    max_abs = max_rel = 0.0
    numerical_failure, warnings = None, []
    for t, inputs in enumerate(trial_inputs):
        before = _snapshot(inputs) if t == 0 else None
        try:
            with torch.no_grad():
                outputs = call_solution(fn, inputs, definition, workload, job.device, dps)
                # Copied on the caller's stream before any sync: work left running on another
                # stream shows up as a difference once everything has finished. Every trial: on the
                # first call CUDA's lazy module loading can serialise the streams and hide it.
                early = _snapshot(outputs) if cuda else None
            if cuda:
                torch.cuda.synchronize()
        except Exception:
            traceback.print_exc()
            return Outcome(Status.RUNTIME_ERROR.value, warnings=warnings)
        if before is not None:
            changed = _changed_inputs(names_in, before, inputs)
            if changed:
                warnings.append(f"inputs modified by the call: {', '.join(changed)}")
        if early is not None and _changed_inputs(names_out, early, outputs) and not any(
                w.startswith("GPU work was still running") for w in warnings):
            warnings.append("GPU work was still running when the call returned (outputs changed after the return: "
                            "work on another stream with no dependency on the caller's stream?)")
        refs = _to_device(trial_refs[t], job.device)
        for name, out, ref in zip(names_out, outputs, refs):
            res = check_output(name, out, ref, job.tolerance)
            if res.stops:  # shape/dtype carry no errors; inf/NaN report inf/NaN
                return Outcome(res.status.value, res.message, res.max_abs, res.max_rel, warnings=warnings)
            max_abs, max_rel = merge_max(max_abs, res.max_abs), merge_max(max_rel, res.max_rel)
            if res.status is not None and numerical_failure is None:
                numerical_failure = f"trial {t}: {res.message}"
    if numerical_failure:
        return Outcome(Status.INCORRECT_NUMERICAL.value, numerical_failure, max_abs, max_rel, warnings=warnings)
    return Outcome(Status.PASSED.value, "", max_abs, max_rel, warnings=warnings)


def _time_trials(fn, trial_inputs, definition, workload, job, dps, outcome):
    """The official timing into `outcome` (latency: the mean over trials of each trial's median; the timer; its
    warnings), then the harness's event-timed calls. Returns the last timed call's (inputs, outputs).

    As FlashInfer-Bench: each trial gets new outputs, and the previous trial's are freed once they exist (so
    the caching allocator hands trial 3 the blocks of trial 1). The event-timed calls (CUDA) come after every
    official call, on the last trial's tensors, so no official trial runs after them."""
    from harness.eval import timing
    per_trial, outputs = [], None
    for t in range(job.timing.trials):
        inputs = trial_inputs[t % len(trial_inputs)]
        outputs = allocate_outputs(definition, workload, job.device) if dps else []
        res = timing.measure(fn, [*inputs, *outputs], job.timing, job.device, job.timer)
        per_trial.append(res.median_ms)
        outcome.timer = res.timer
        outcome.warnings.extend(w for w in res.warnings if w not in outcome.warnings)
    outcome.latency_ms = sum(per_trial) / len(per_trial)
    if job.device.startswith("cuda"):
        from harness.eval.timing_cuda import event_time_ms
        try:   # calls the official evaluator never makes: their failure must not change the status
            outcome.event_ms = event_time_ms(fn, [*inputs, *outputs], max(job.timing.iters, 1) * job.timing.trials)
        except Exception as exc:
            outcome.warnings.append(f"the event-timed calls after the official ones raised {type(exc).__name__}: "
                                    f"{exc} (no event time; the status is the official calls')")
    return inputs, outputs


def _clone_to(values, device):
    """Device copies, one allocation each (as FlashInfer-Bench's clones)."""
    return [x.to(device, copy=True) if isinstance(x, torch.Tensor) else x for x in values]


def _syncs_host(fn, args):
    """Whether a call blocks the host on earlier GPU work: queue a GPU sleep much longer than the call's
    own host time, call, and see if the stream is already idle when the call returns."""
    import time

    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*args)
        host_s = time.perf_counter() - t0
        torch.cuda.synchronize()
        sleep_s = min(max(0.01, 20 * host_s), 2.0)  # 10 ms dwarfs a launch; 20x the call's own host time
        torch.cuda._sleep(int(sleep_s * 2e9))  # cycles; H100/H200/B200 clocks are ~1.5-2 GHz
        fn(*args)
        idle = torch.cuda.current_stream().query()
        torch.cuda.synchronize()
    return idle


def _fresh_check(fn, inputs, outputs, fresh, definition, workload, job, dps, warnings):
    """After timing, one call on values the solution has never seen, written into the same input tensors it
    was timed on, with the same output tensors (same pointers; the parent perturbed the floats and computed
    their reference). A wrong answer means memoized or stale outputs. On CUDA, further calls then check
    for host syncs (_syncs_host)."""
    for x, new in zip(inputs, fresh["inputs"]):
        if isinstance(x, torch.Tensor):
            x.copy_(new)
    cuda = job.device.startswith("cuda")
    try:
        with torch.no_grad():
            outputs = call_solution(fn, inputs, definition, workload, job.device, dps,
                                    poison(outputs) if dps and outputs else None)
        if cuda:
            torch.cuda.synchronize()
    except Exception as exc:
        return f"the call failed on fresh inputs after timing: {type(exc).__name__}: {exc}"
    refs = _to_device(fresh["outputs"], job.device)
    for name, out, ref in zip(definition.outputs, outputs, refs):
        res = check_output(name, out, ref, job.tolerance)
        if res.status is not None:
            return (f"wrong outputs on fresh inputs after timing ({res.message}): memoized or stale results "
                    "(keyed on input pointers or a fingerprint?)")
    try:
        if cuda and _syncs_host(fn, [*inputs, *(outputs if dps else [])]):
            warnings.append("host sync inside the call (it waited for GPU work queued before it: .item(), "
                            ".cpu(), torch.cuda.synchronize()...); the official span timer charges the stall")
    except Exception as exc:
        return f"the call failed in the host-sync check: {type(exc).__name__}: {exc}"
    return None
