"""Around the timed calls, as officially: a measured latency of 0 is RUNTIME_ERROR (FIB's speedup division raises
in the child), calls the official evaluator never makes (the event-timed ones) cannot change a status, and the
trace's timestamp is the child's, taken when its evaluation ends."""
import harness.eval.child
import harness.eval.timing
import harness.eval.timing_cuda
from harness.data.dataset import Dataset
from harness.data.solution import Solution
from harness.eval.child import TimingConfig
from harness.eval.loop import evaluate
from harness.eval.options import EvalOptions
from tests.toy import make_toy_root, toy_solution

GOOD = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"


def _run_toy(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    toy = ds.definition("toy_axpy")
    sol = Solution.from_json(toy_solution("good", GOOD), "good")
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), show_progress=False,
                       profile_baseline=False, isolation="none")
    return evaluate(ds, toy, ds.workloads(toy)[:1], [sol], opts)


def test_a_zero_latency_is_a_runtime_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(harness.eval.timing, "_measure_cpu",
                        lambda fn, args, cfg: harness.eval.timing.TimingResult(0.0, harness.eval.timing.CPU_LABEL))
    [r] = _run_toy(tmp_path)
    assert r.trace.evaluation.status.value == "RUNTIME_ERROR" and r.trace.evaluation.performance is None
    # isolation none: the child's output is this process's (a child's would be in the trace log)
    assert "ZeroDivisionError: float division by zero" in capsys.readouterr().out


def test_the_timestamp_is_the_childs(tmp_path, monkeypatch):
    monkeypatch.setattr(harness.eval.child, "now", lambda: "2001-02-03T04:05:06.000007")
    [r] = _run_toy(tmp_path)
    assert r.trace.evaluation.status.value == "PASSED"
    assert r.trace.evaluation.timestamp == "2001-02-03T04:05:06.000007"


def _cuda_job(trials):
    """A value-returning job 'on CUDA' (no tensor is allocated: the timer and the event timing are stubbed)."""
    return harness.eval.child.Job(definition={}, solution={}, workload={}, payload_path="", device="cuda",
                                  timing=TimingConfig(0, 3, trials))


def _stub_timers(monkeypatch, log):
    def official(fn, args, cfg):
        for _ in range(cfg.iters):
            log.append("official")
            fn(*args)
        return [0.010, 0.012, 0.011]

    def events(fn, args, iters):
        for _ in range(iters):
            log.append("event")
            fn(*args)
        return 0.5

    monkeypatch.setattr(harness.eval.timing_cuda, "resolve_timer", lambda timer: "cupti")
    monkeypatch.setattr(harness.eval.timing_cuda, "_cupti_times", official)
    monkeypatch.setattr(harness.eval.timing_cuda, "event_time_ms", events)


def test_event_timed_calls_that_raise_leave_the_official_figure(monkeypatch):
    log = []

    def fn():
        if log[-1] == "event":   # the official calls pass; the extra ones fail
            raise RuntimeError("out of workspace")

    _stub_timers(monkeypatch, log)
    outcome = harness.eval.child.Outcome("PASSED")
    harness.eval.child._time_trials(fn, [[]], None, None, _cuda_job(1), False, outcome)
    assert outcome.latency_ms == 0.011 and outcome.event_ms is None
    assert outcome.warnings == ["the event-timed calls after the official ones raised RuntimeError: out of "
                                "workspace (no event time; the status is the official calls')"]


def test_the_event_timed_calls_come_after_every_official_call(monkeypatch):
    """FlashInfer-Bench runs its timing trials back to back; the harness's extra calls must not run between them
    (an in-place solution's state would move on, and the GPU would do work the official run does not)."""
    log = []
    _stub_timers(monkeypatch, log)
    outcome = harness.eval.child.Outcome("PASSED")
    harness.eval.child._time_trials(lambda: None, [[]], None, None, _cuda_job(3), False, outcome)
    assert log == ["official"] * 9 + ["event"] * 9 and outcome.event_ms == 0.5


def test_the_official_timer_makes_no_extra_calls(monkeypatch):
    """The timer itself (solutions, the reference, the state copy, tune) makes only the official calls."""
    log = []
    _stub_timers(monkeypatch, log)
    res = harness.eval.timing.measure(lambda: None, [], TimingConfig(0, 3, 1), "cuda")
    assert log == ["official"] * 3 and res.median_ms == 0.011


PROBE = """
import sys, types, weakref
P = sys.modules.setdefault("_toy_output_probe", types.ModuleType("_toy_output_probe"))

def run(x, y, alpha, z):
    seen = P.__dict__.setdefault("seen", [])
    # per call: how many output tensors given to earlier calls are still alive, this call's own excepted, and
    # whether this call's was given to an earlier call
    P.__dict__.setdefault("calls", []).append((sum(1 for r in seen if r() is not None and r() is not z),
                                               any(r() is z for r in seen)))
    seen.append(weakref.ref(z))
    z.copy_(x + alpha * y)
"""


def test_the_timed_calls_run_beside_no_earlier_outputs(tmp_path):
    """As in FlashInfer-Bench's child: the correctness calls' outputs are freed before timing, and each timing trial
    frees the previous trial's outputs (so on CUDA the caching allocator reuses their blocks); then the check on
    fresh inputs reuses the last trial's outputs."""
    import sys

    ds = Dataset(make_toy_root(tmp_path / "toy"))
    toy = ds.definition("toy_axpy")
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 3), show_progress=False,
                       profile_baseline=False, isolation="none")
    sys.modules.pop("_toy_output_probe", None)
    [r] = evaluate(ds, toy, ds.workloads(toy)[:1], [Solution.from_json(toy_solution("probe", PROBE), "probe")], opts)
    assert r.trace.evaluation.status.value == "PASSED"
    calls = sys.modules.pop("_toy_output_probe").calls
    # 3 correctness calls; per timing trial one untimed call and one timed (0 warmup, 1 iteration); the fresh check
    assert len(calls) == 3 + 3 * 2 + 1
    # each trial: new outputs for its first call, the same for its second, and nothing else alive
    assert calls[3:9] == [(0, False), (0, True)] * 3
    assert calls[9] == (0, True)   # an output given before, and the only one alive: the last trial's


def test_the_timer_and_reference_differences_are_printed_where_they_apply():
    from harness.eval.options import differences
    gpu = differences(EvalOptions(device="cuda", isolation="process"))
    assert any(n.startswith("the official CUPTI timer is required") for n in gpu)
    assert any(n.startswith("reference latencies are cached") for n in gpu)
    assert any("Should they raise, the pair keeps its official status" in n for n in gpu)
    events = differences(EvalOptions(device="cuda", isolation="process", timer="events", profile_baseline=False))
    assert not any(n.startswith("the official CUPTI timer is required") for n in events)
    assert not any(n.startswith("reference latencies are cached") for n in events)
    cpu = differences(EvalOptions(device="cpu", isolation="process"))
    assert not any("CUPTI" in n or n.startswith("reference latencies are cached") for n in cpu)
    # a GPU run that times no reference says so (its traces carry 0s where the contest's carry the figure)
    assert any(n.startswith("the reference is not timed (--no-profile-baseline)") for n in events)
    assert not any(n.startswith("the reference is not timed") for n in gpu + cpu)


def test_the_mechanics_and_flashinfer_benchs_own_runner_rules_are_printed():
    from harness.eval.options import differences
    worker = differences(EvalOptions(device="cpu", isolation="worker"))
    process = differences(EvalOptions(device="cpu", isolation="process"))
    skip = "FlashInfer-Bench's own persistent runner skips a solution for the rest of the run after one COMPILE_ERROR"
    assert any(skip in n for n in worker) and not any(skip in n for n in process)
    for notes in (worker, process):
        assert any(n.startswith("random inputs use a recorded seed (--seed) and are drawn in fp32, then cast")
                   for n in notes)
        assert any(n.startswith("mechanics that change no figure: traces are appended as each pair ends")
                   for n in notes)
        assert any("eval_settings" in n for n in notes if n.startswith("environment.libs carries"))


def test_tolerances_events_isolation_none_and_the_gpu_are_printed_where_they_apply():
    """Each can change a verdict or a latency against the official run, so a run says so."""
    from harness.eval.correctness import Tolerance
    from harness.eval.options import differences
    plain = differences(EvalOptions(device="cuda", isolation="process"))
    loose = differences(EvalOptions(device="cpu", tolerance=Tolerance(0.5, 0.01, 0.99), isolation="none"))
    assert not any("--atol/--rtol" in n or "--isolation none" in n or "--timer events" in n for n in plain)
    assert ("correctness uses atol 0.5, rtol 0.01 and a required matched ratio of 0.99 (--atol/--rtol/"
            "--required-matched-ratio; officially 0.01, 0.01 and 1)") in loose
    assert any(n.startswith("--isolation none: solutions run in this process, with no timeout") for n in loose)
    events = differences(EvalOptions(device="cuda", isolation="process", timer="events"))
    assert any(n.startswith("latencies are CUDA-event times (--timer events), NOT the official") for n in events)
    assert any(n.startswith("this run times on ") and "the contest timed on a B200" in n for n in plain)
    assert not any("the contest timed on a B200" in n for n in loose)
    assert any("a crash or a hang in them makes the pair RUNTIME_ERROR or TIMEOUT" in n for n in loose)


def test_a_child_makes_the_runs_gpu_its_current_one(monkeypatch):
    """--device cuda:1: synchronize, events and Triton's launches act on the current GPU, so the child sets it (as
    FlashInfer-Bench's torch.cuda.device(device) around each call does) before it makes its CUDA context."""
    import torch

    from harness.eval import pool
    calls = []
    monkeypatch.setattr(torch.cuda, "init", lambda: calls.append("init"))
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(torch, "empty", lambda *a, device=None, **k: calls.append(("empty", device)))
    pool._warm_up_cuda("cuda:1")
    assert calls[:3] == ["init", ("set_device", torch.device("cuda:1")), ("empty", "cuda:1")]
    calls.clear()
    pool._warm_up_cuda("cuda")      # the current GPU: torch's set_device refuses a device without an index
    assert calls[:2] == ["init", ("empty", "cuda")]


def test_settings_other_than_the_official_ones_are_printed_on_a_gpu():
    from harness.eval.options import differences
    official = TimingConfig(10, 50, 3)
    same = differences(EvalOptions(device="cuda", timing=TimingConfig(10, 50, 3), official=official))
    other = differences(EvalOptions(device="cuda", timing=TimingConfig(1, 5, 3), official=official))
    assert not any("--warmup/--iterations/--trials" in n for n in same)
    assert ("solutions are timed with 1 warmup, 5 timed call(s) per trial and 3 trial(s) (--warmup/--iterations/"
            "--trials; officially 10/50/3)") in other


def test_several_visible_gpus_are_a_printed_difference_and_fidelity_refuses_them(monkeypatch, tmp_path, capsys):
    import torch

    from harness.cli import main
    from harness.dist.cluster import RayOptions
    from harness.eval.options import differences
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    several = differences(EvalOptions(device="cuda"))
    assert any(n.startswith("2 GPUs are visible and this run uses one; FlashInfer-Bench would time the reference on "
                            "each") for n in several)
    assert not any("GPUs are visible" in n for n in differences(EvalOptions(device="cuda", ray=RayOptions("local"))))
    assert not any("GPUs are visible" in n for n in differences(EvalOptions(device="cpu")))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(harness.eval.timing_cuda, "resolve_timer", lambda timer: "cupti")
    assert main(["fidelity", "--solution", "ours", "--out", str(tmp_path / "f")]) == 2
    assert "2 GPUs are visible" in capsys.readouterr().err and not (tmp_path / "f").exists()
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert not any("GPUs are visible" in n for n in differences(EvalOptions(device="cuda")))
