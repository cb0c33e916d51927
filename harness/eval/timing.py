"""Timers. On CUDA the official one is the CUPTI span of flashinfer.testing.bench_gpu_time_with_cupti
(cold L2, no CUDA graph); on CPU (--device cpu) only a wall clock exists, labelled as such."""
import statistics
import time
from dataclasses import dataclass, field


class TimingError(Exception):
    """A timing fault the official evaluator reports as RUNTIME_ERROR (e.g. no GPU work recorded)."""


@dataclass
class TimingResult:
    median_ms: float
    timer: str
    warnings: list = field(default_factory=list)


CPU_LABEL = "cpu-wall-clock (not official)"


def timer_label(device, timer="auto"):
    """The label a run's timings carry (traces, extras, reports)."""
    if not device.startswith("cuda"):
        return CPU_LABEL
    from harness.eval.timing_cuda import CUPTI_LABEL, EVENTS_LABEL
    return EVENTS_LABEL if timer == "events" else CUPTI_LABEL


def measure(fn, args, cfg, device, timer="auto"):
    if not device.startswith("cuda"):
        return _measure_cpu(fn, args, cfg)
    from harness.eval import timing_cuda
    return timing_cuda.measure(fn, args, cfg, timer)


def _measure_cpu(fn, args, cfg):
    fn(*args)
    for _ in range(cfg.warmup):
        fn(*args)
    times = []
    for _ in range(cfg.iters):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return TimingResult(statistics.median(times), CPU_LABEL)
