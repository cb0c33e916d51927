"""Evaluate one (workload, solution) pair: build, call per trial, check, then time.

This is what runs inside the isolated child process (harness/isolation.py). It receives plain data
(JSON dicts and the path of a payload file holding the trial inputs and reference outputs) and
returns a plain dict, so nothing of the solution's objects crosses the process boundary."""
import traceback
from dataclasses import dataclass, field

import torch

from harness.builders import BuildError, build, check_signature
from harness.correctness import Tolerance, check_output, merge_max, normalize_outputs
from harness.definition import Definition
from harness.inputs import allocate_outputs, torch_dtype
from harness.solution import Solution
from harness.trace import Status
from harness.workload import Workload


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
    timer: str = "auto"             # see harness/timing.py
    profile: bool = True            # time the solution once correct


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

    def to_dict(self):
        return dict(self.__dict__)


def _to_device(values, device):
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _snapshot(values):
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]


def _changed_inputs(names, before, after):
    out = []
    for name, b, a in zip(names, before, after):
        if isinstance(b, torch.Tensor) and not torch.equal(b, a):
            out.append(name)
    return out


def call_solution(fn, inputs, definition, workload, device, dps):
    """One call in the official convention. Returns the outputs as a list."""
    if dps:
        outputs = allocate_outputs(definition, workload, device)
        fn(*inputs, *outputs)
        return outputs
    return normalize_outputs(fn(*inputs), list(definition.outputs),
                             [torch_dtype(s.dtype) for s in definition.outputs.values()], device)


def run_job(job):
    """Build, check correctness over all trials, then time. Never raises for solution faults.

    As officially: the child clones the trial inputs once; the same clones feed the correctness calls
    and then the timing calls."""
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
        return Outcome(Status.COMPILE_ERROR.value)

    payload = torch.load(job.payload_path, map_location="cpu", weights_only=False)
    trial_refs = payload["outputs"]
    trial_inputs = [[x.to(job.device).clone() if isinstance(x, torch.Tensor) else x for x in inputs]
                    for inputs in payload["inputs"]]
    names_in, names_out = list(definition.inputs), list(definition.outputs)
    max_abs = max_rel = 0.0
    numerical_failure, warnings = None, []
    for t, inputs in enumerate(trial_inputs):
        before = _snapshot(inputs) if t == 0 else None
        try:
            with torch.no_grad():
                outputs = call_solution(fn, inputs, definition, workload, job.device, dps)
            if job.device.startswith("cuda"):
                torch.cuda.synchronize()
        except Exception:
            traceback.print_exc()
            return Outcome(Status.RUNTIME_ERROR.value, warnings=warnings)
        if before is not None:
            changed = _changed_inputs(names_in, before, inputs)
            if changed:
                warnings.append(f"inputs modified by the call: {', '.join(changed)}")
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

    outcome = Outcome(Status.PASSED.value, "", max_abs, max_rel, warnings=warnings)
    if not job.profile:
        return outcome
    from harness import timing
    try:
        per_trial, events, timer = [], [], None
        for t in range(job.timing.trials):
            inputs = trial_inputs[t % len(trial_inputs)]
            outputs = allocate_outputs(definition, workload, job.device) if dps else []
            res = timing.measure(fn, [*inputs, *outputs], job.timing, job.device, job.timer)
            per_trial.append(res.median_ms)
            timer = res.timer
            if res.event_ms is not None:
                events.append(res.event_ms)
            warnings.extend(w for w in res.warnings if w not in warnings)
    except Exception:
        traceback.print_exc()
        return Outcome(Status.RUNTIME_ERROR.value, warnings=warnings)
    outcome.latency_ms = sum(per_trial) / len(per_trial)
    outcome.event_ms = sum(events) / len(events) if events else None
    outcome.timer = timer
    return outcome
