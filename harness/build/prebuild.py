"""Build the native (CUDA/C++) solutions of a run side by side before any pair is timed.

A CUDA solution's first build takes about a minute of nvcc; inside the loop, one build after another, a run of
ten such entries would spend ten minutes before its first timing. Built here in parallel processes into the same
content-keyed cache (harness/build/builders.py), each child later finds its build done. A build that fails here
is simply built again by its child, which reports the official COMPILE_ERROR with its log. The difference to the
official runner (a build there counts against the pair's timeout, as it does here for a first build in the loop)
is printed by the caller."""
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor

NATIVE = ("cuda", "cpp")


def _build_one(solution_json):
    from harness.build.builders import BuildError, build
    from harness.data.solution import Solution

    t0 = time.monotonic()
    try:
        build(Solution.from_json(solution_json, "<prebuild>"))
        return None, time.monotonic() - t0
    except BuildError as exc:
        return str(exc).splitlines()[0][:200], time.monotonic() - t0


def native(solutions):
    return [s for s in solutions if s.spec.language in NATIVE]


class Prebuild:
    """The builds of a run's native solutions, started in the background (so the payloads can be prepared
    meanwhile); wait() returns {name: (error or None, seconds)}."""

    def __init__(self, solutions, jobs):
        todo = native(solutions)
        self.started = time.monotonic()
        self.pool = (ProcessPoolExecutor(max_workers=max(1, min(jobs, len(todo))), mp_context=mp.get_context("spawn"))
                     if todo else None)
        self.futures = {s.name: self.pool.submit(_build_one, s.to_json()) for s in todo} if todo else {}

    def wait(self):
        if self.pool is None:
            return {}
        try:
            return {name: f.result() for name, f in self.futures.items()}
        finally:
            self.pool.shutdown()

