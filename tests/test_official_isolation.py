"""--isolation process behaves as the official isolated runner (FIB bench/runner/isolated_runner.py,
SubprocessWorker.run_solution): one child per pair, started when its pair begins (no spares by default); the
pair's clock runs from the child's start; the child must report ready within 30 s of its start.

A child's start is slowed or broken through the pool's test hook: GDN_HARNESS_CHILD_STARTUP_HOOK names a
function of this module, which the spawned child calls just before it reports ready."""
import multiprocessing
import os
import time

import pytest

from harness.data.dataset import Dataset
from harness.data.solution import Solution
from harness.eval import pool
from harness.eval.child import TimingConfig
from harness.eval.loop import evaluate
from harness.eval.options import EvalOptions, differences
from tests.toy import make_toy_root, toy_solution

GOOD = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"
DELAY_ENV = "GDN_HARNESS_TEST_START_DELAY"


def slow_start():
    """The startup hook (runs in the child): sleep before reporting ready."""
    time.sleep(float(os.environ[DELAY_ENV]))


def dies_at_start():
    """The startup hook (runs in the child): die before reporting ready."""
    os._exit(3)


def _hook(monkeypatch, function, delay=None):
    monkeypatch.setenv(pool.STARTUP_HOOK_ENV, f"tests.test_official_isolation:{function}")
    if delay is not None:
        monkeypatch.setenv(DELAY_ENV, str(delay))


def _run(tmp_path, names=("good",), workloads=("w-random",), **kw):
    root = make_toy_root(tmp_path / "toy")
    ds = Dataset(root)
    definition = ds.definition("toy_axpy")
    chosen = [w for w in ds.workloads(definition) if w.uuid in workloads]
    sols = [Solution.from_json(toy_solution(n, GOOD), n) for n in names]
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), show_progress=False,
                       isolation="process", **kw)
    start = time.monotonic()
    results = evaluate(ds, definition, chosen, sols, opts)
    return results, time.monotonic() - start, opts


def test_the_clock_runs_from_the_child_start(tmp_path, monkeypatch):
    """A fast job whose child needs 5 s to start, under a 3 s timeout: TIMEOUT, with the official message.
    Counted from the job's send (the project before P12) it would pass."""
    _hook(monkeypatch, "slow_start", delay=5)
    (r,), wall, _ = _run(tmp_path, timeout=3)
    ev = r.trace.evaluation
    assert ev.status.value == "TIMEOUT", ev.log[-1500:]
    assert "Evaluation timeout after 3 seconds for solution good" in ev.log
    assert "Worker failed to start" not in ev.log


def test_ready_limit_counts_from_the_child_start(tmp_path, monkeypatch):
    """A child not ready within the limit (30 s officially; 1 s here) is killed at the limit: TIMEOUT with the
    official message, even though the pair's timeout is far away."""
    assert pool.READY_LIMIT_S == 30.0
    assert pool.NOT_READY.format(pool.READY_LIMIT_S) == "Worker failed to start within 30 seconds"
    monkeypatch.setattr(pool, "READY_LIMIT_S", 1.0)
    _hook(monkeypatch, "slow_start", delay=30)
    (r,), wall, _ = _run(tmp_path, timeout=60)
    ev = r.trace.evaluation
    assert ev.status.value == "TIMEOUT", ev.log[-1500:]
    assert ev.log.strip().endswith("Worker failed to start within 1 seconds")
    assert ev.correctness is None and ev.performance is None
    assert wall < 20  # killed at the ready limit, not after the 30 s start or the 60 s timeout
    assert not multiprocessing.active_children()


def test_a_child_that_dies_before_ready_is_a_runtime_error(tmp_path, monkeypatch):
    _hook(monkeypatch, "dies_at_start")
    (r,), _, _ = _run(tmp_path, timeout=60)
    ev = r.trace.evaluation
    assert ev.status.value == "RUNTIME_ERROR", ev.log[-1500:]
    assert "Worker process failed unexpectedly (exit code 3)" in ev.log


def _count_children_at_send(monkeypatch):
    """Live children of this process each time a job has just been sent (the pair's child and any spares)."""
    counts, wait = [], pool._Child.wait_result

    def spy(child, deadline):
        counts.append(len(multiprocessing.active_children()))
        return wait(child, deadline)

    monkeypatch.setattr(pool._Child, "wait_result", spy)
    return counts


def test_no_spare_children_by_default(tmp_path, monkeypatch):
    """As officially: one child per pair, started after the previous one ends; none beside a timed call."""
    assert not multiprocessing.active_children()
    counts = _count_children_at_send(monkeypatch)
    results, _, opts = _run(tmp_path, names=("a", "b"), workloads=("w-random", "w-blob"), timeout=60)
    assert [r.trace.evaluation.status.value for r in results] == ["PASSED"] * 4
    assert counts == [1, 1, 1, 1]
    assert not any("spare" in note for note in differences(opts))
    with pool.ChildPool("process") as default:   # closed: its log folder goes
        assert default.prestart == 0


def test_prestart_is_an_opt_in_with_a_printed_difference(tmp_path, monkeypatch):
    counts = _count_children_at_send(monkeypatch)
    results, _, opts = _run(tmp_path, names=("a", "b"), timeout=60, prestart=2)
    assert [r.trace.evaluation.status.value for r in results] == ["PASSED"] * 2
    assert counts == [3, 3]  # the pair's child and 2 spares starting beside it
    assert not multiprocessing.active_children()  # every spare is shut down
    assert ("2 spare children start beside the timed calls (the official runner starts one child per pair, "
            "after the previous one ends)") in " ".join(differences(opts))


@pytest.mark.parametrize("isolation", ["process", "worker"])
def test_the_kept_child_log_is_a_printed_difference(isolation):
    notes = differences(EvalOptions(isolation=isolation))
    assert any("Worker process failed unexpectedly" in n and "/tmp" in n for n in notes)
    assert not any("Worker process failed" in n for n in differences(EvalOptions(isolation="none")))
