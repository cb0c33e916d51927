"""Who runs a pass's pairs: this host's children, one pair at a time (LocalRunner), or Ray actors
(harness/dist/runner.py, with --ray). Both take pairs by submit() and hand each result to the Recorder as it
arrives; drain() returns once every submitted pair is recorded."""
import time

from harness.eval.pool import ChildPool
from harness.eval.record import Ran, host_of


def pool_of(opts):
    """The ChildPool that runs pairs in isolation, by --isolation (one per host process or actor)."""
    return ChildPool(opts.isolation, opts.device, opts.timeout, opts.prestart)


def run_timed(pool, job):
    """(outcome, log, wall seconds) of one job in `pool`."""
    start = time.monotonic()
    outcome, log = pool.run(job)
    return outcome, log, time.monotonic() - start


class LocalRunner:
    def __init__(self, opts, recorder):
        self.pool, self.recorder, self.host = pool_of(opts), recorder, host_of(opts.device)

    def start(self, names):
        """Start these solutions' children before the first pair (worker mode; see ChildPool.start_workers)."""
        self.pool.start_workers(names)

    def submit(self, pair):
        self.recorder.record(pair, Ran(*run_timed(self.pool, pair.job), self.host))

    def drain(self):
        """Nothing to wait for: submit() records its pair before it returns."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.pool.close()


def open_runner(opts, recorder):
    if opts.ray is not None:
        from harness.dist.runner import RayRunner
        return RayRunner(opts, recorder)
    return LocalRunner(opts, recorder)
