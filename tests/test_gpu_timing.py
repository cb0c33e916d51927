"""GPU-only: the official timer's behaviour on known callables (run on the device: make test-gpu)."""
import pytest
import torch

from harness.eval.child import TimingConfig

pytestmark = pytest.mark.gpu
CFG = TimingConfig(warmup=5, iters=20, trials=1)


def _cupti_or_skip():
    from harness.eval.timing_cuda import cupti_status
    ok, detail = cupti_status()
    if not ok:
        pytest.skip(detail)


def test_single_kernel_cupti_below_event_time():
    _cupti_or_skip()
    from harness.eval.timing_cuda import event_time_ms, measure
    x = torch.randn(1 << 16, device="cuda")
    y = torch.empty_like(x)
    fn = lambda a, b: torch.mul(a, 2.0, out=b)  # noqa: E731
    r = measure(fn, [x, y], CFG)
    assert r.timer.startswith("cupti")
    assert 0.0005 < r.median_ms < 0.05  # a few microseconds of GPU time
    # the child's event-timed calls (back to back, after the official ones) include the host's launch cost
    assert event_time_ms(fn, [x, y], CFG.iters) > r.median_ms


def test_host_gap_between_kernels_is_charged():
    _cupti_or_skip()
    import time

    from harness.eval.timing_cuda import measure
    x = torch.randn(1 << 10, device="cuda")

    def two_kernels_with_gap(a):
        a.mul_(1.0)
        time.sleep(0.002)  # host work between launches: the span timer charges it
        a.add_(0.0)

    r = measure(two_kernels_with_gap, [x], CFG)
    assert r.median_ms > 1.5


def test_no_gpu_work_is_an_error():
    _cupti_or_skip()
    from harness.eval.timing_cuda import measure
    with pytest.raises(Exception, match="No kernel activities recorded"):
        measure(lambda a: None, [torch.zeros(1, device="cuda")], CFG)


def test_inconsistent_kernels_is_an_error():
    _cupti_or_skip()
    from harness.eval.timing_cuda import measure
    calls = [0]

    def flaky(a):
        calls[0] += 1
        (a.mul_(1.0) if calls[0] % 2 else a.add_(0.0))

    with pytest.raises(Exception, match="Inconsistent kernel names"):
        measure(flaky, [torch.zeros(16, device="cuda")], CFG)


def test_events_timer_is_labelled():
    from harness.eval.timing_cuda import measure
    x = torch.randn(1 << 16, device="cuda")
    r = measure(lambda a: a.mul_(1.0), [x], CFG, timer="events")
    assert "NOT the official" in r.timer


def test_the_state_copy_moves_its_bytes_at_a_memory_bound_rate():
    """--state-copy on the largest decode workload (B = 64: 32 MiB read, 32 MiB written): the official timer sees the
    copy (a device-to-device memcpy, not a kernel) and its rate lies between 0.5 and 10 TB/s (an H200 peaks near
    4.8, a B200 near 8)."""
    _cupti_or_skip()
    from harness.data.dataset import Dataset
    from harness.eval.inputs import load_blobs, materialize
    from harness.eval.state_copy import copy_latency_ms

    ds = Dataset()
    decode = ds.definition("gdn_decode_qk4_v8_d128_k_last")
    w = next(w for w in ds.workloads(decode) if w.axes["batch_size"] == 64)
    inputs = materialize(decode, w, load_blobs(ds, decode, w), "cuda", 0, 0)
    ms = copy_latency_ms(decode, w, inputs, TimingConfig(warmup=10, iters=50, trials=3), "cuda")
    moved = 2 * 64 * 8 * 128 * 128 * 4
    assert moved / 10e12 < ms * 1e-3 < moved / 0.5e12
