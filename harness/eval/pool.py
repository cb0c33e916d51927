"""Run jobs in isolated processes: a fresh spawned child per (workload, solution) pair, with a
wall-clock timeout, as the official isolated runner (FIB bench/runner/isolated_runner.py,
SubprocessWorker.run_solution).

Modes:
- "process" (the official mode): one child per pair, started when its pair begins, after the previous
  pair's child has ended, so the parent is idle while a child times. The pair's clock starts at the
  child's start, so --timeout covers interpreter start, imports (torch, Triton, FlashInfer), the CUDA
  context, the build and everything after; the child must also report ready within READY_LIMIT_S
  (30 s) of its start, else TIMEOUT "Worker failed to start within 30 seconds". `prestart` N > 0 (an
  opt-in for speed, printed as a deliberate difference) keeps N spare children starting ahead, beside
  the timed calls; a spare's clock starts when its pair begins (its own start-up happened earlier, on
  nobody's clock), and it still has to have been ready within READY_LIMIT_S of its own start.
- "worker": one persistent child per solution, restarted after a crash. The clock starts when the job
  is sent, as in FIB's persistent runner (persistent_runner.py: poll(timeout_seconds) after the send):
  a child serves many pairs, so there is no per-pair start to count from. The loop starts every
  solution's child side by side before the first pair and waits for them (start_workers); a child
  restarted after a crash starts on its next pair's clock (its job waits in the pipe). There is no
  separate ready limit.
- "none": in this process, for debugging only (no timeout; a crash ends the run).

A crash of the child (segfault, CUDA illegal access, os._exit) becomes RUNTIME_ERROR "Worker process
failed unexpectedly (exit code N)" with the child's log (officially the log is empty and the child's
log stays in /tmp: a printed deliberate difference); a child still running at the deadline is killed
and becomes TIMEOUT."""
import importlib
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

from harness.data.trace import Status
from harness.eval.scratch import own_scratch

LOG_LIMIT = 5 * 1024 * 1024  # bytes of child output kept in a trace log: the head, as officially
READY_LIMIT_S = 30.0         # process mode: a child must report ready this long after its start (FIB: 30 s)
NOT_READY = "Worker failed to start within {:g} seconds"  # the official TIMEOUT message (30 s)
TIMED_OUT = "Evaluation timeout after {:g} seconds for solution {}"  # the official TIMEOUT message (timeout, name)
CRASHED = "Worker process failed unexpectedly"  # the official RUNTIME_ERROR message of a dead child
LOGS = "gdn-harness-logs-"   # + the pool's pid: its children's log files (scratch.own_scratch)
READY = "READY"              # the child's first message, once its start-up is done
WORKERS_READY_S = 120.0      # worker mode: how long the loop waits for the children it starts side by side
# Tests only: "module:function", called in the child just before it reports ready, to slow or observe a
# child's start on the CPU (tests/test_official_isolation.py). Never set in real runs.
STARTUP_HOOK_ENV = "GDN_HARNESS_CHILD_STARTUP_HOOK"


def use_triton_interpreter(device):
    """On the CPU, Triton kernels can only run through its interpreter; the switch must be set before a
    solution's module applies @triton.jit. Never on a GPU."""
    if not device.startswith("cuda"):
        os.environ["TRITON_INTERPRET"] = "1"


def _child_main(conn, log_path, device, one_shot):
    # Everything the solution prints, from Python or from C, lands in the log file.
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    use_triton_interpreter(device)
    from harness.eval.child import run_job  # the slow part of start-up (torch)

    if device.startswith("cuda"):
        _warm_up_cuda(device)
    hook = os.environ.get(STARTUP_HOOK_ENV)
    if hook:
        module, _, function = hook.partition(":")
        getattr(importlib.import_module(module), function)()
    # Officially READY follows torch, FlashInfer's timer, the CUDA context and the builder registry; the
    # build comes after it, on the pair's clock, as here.
    conn.send(READY)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        conn.send(run_job(job).to_dict())
        if one_shot:
            return


def _warm_up_cuda(device):
    """Start-up work every CUDA child repeats (CUDA context, Triton, FlashInfer's timer and CUPTI), done
    before the child reports ready, as officially. The run's GPU (`device`, e.g. cuda:1) becomes the current one,
    as FlashInfer-Bench's torch.cuda.device(device) around each call makes it: synchronize, events and Triton's
    launches act on the current GPU. Failures are left for the job to meet."""
    import torch
    torch.cuda.init()
    if torch.device(device).index is not None:   # plain "cuda" is the current GPU already (set_device refuses it)
        torch.cuda.set_device(torch.device(device))
    torch.empty(1, device=device)  # creates the context without launching a kernel beside a timed one
    for module in ("triton", "flashinfer.testing", "cupti"):
        try:
            importlib.import_module(module)
        except Exception:
            pass


_TIMED_OUT = object()


class _Child:
    def __init__(self, ctx, device, one_shot, log_dir):
        fd, self.log_path = tempfile.mkstemp(prefix="child-", suffix=".log", dir=log_dir)
        os.close(fd)
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=_child_main, args=(child_conn, self.log_path, device, one_shot),
                                daemon=True)
        self.proc.start()
        self.started = time.monotonic()  # officially the pair's clock starts right after proc.start()
        child_conn.close()
        self.log_offset = 0
        self.ready = False

    def wait_ready(self, deadline):
        """Wait until `deadline` (time.monotonic()) for the child's READY: True once ready, False if still
        starting at the deadline, None if it died first."""
        while not self.ready:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.conn.poll(min(left, 0.5)):
                try:
                    self.ready = self.conn.recv() == READY
                except (EOFError, ConnectionError):
                    return None
            elif not self.proc.is_alive() and not self.conn.poll(0):
                return None
        return True

    def wait_result(self, deadline):
        """The job's result (a dict), _TIMED_OUT at `deadline`, or None if the child died. A READY still in
        the pipe (worker mode sends the first job before it) is skipped."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return _TIMED_OUT
            if self.conn.poll(min(left, 0.5)):
                try:
                    message = self.conn.recv()
                except (EOFError, ConnectionError):
                    return None
                if message == READY:
                    self.ready = True
                    continue
                return message
            if not self.proc.is_alive() and not self.conn.poll(0):
                return None

    def read_log(self):
        """This job's log (the head, truncated as officially); worker mode reads on from the last job."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                data = f.read(LOG_LIMIT + 1)
                f.seek(0, os.SEEK_END)
                self.log_offset = f.tell()
        except OSError:
            return ""
        return truncate_log(data)

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)

    def close(self):
        self.kill()
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


def truncate_log(data, limit=LOG_LIMIT):
    """The official rule: keep the first `limit` bytes and mark the cut."""
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace")
    return data[:limit].decode("utf-8", errors="replace") + "\n\n[log truncated]\n"


class ChildPool:
    """The children that run Job objects (by isolation mode); run() returns (outcome dict, log text).
    `prestart`: process mode only, spare children kept starting ahead (None or 0: none, as officially)."""

    def __init__(self, mode="process", device="cpu", timeout=300.0, prestart=None):
        if mode not in ("process", "worker", "none"):
            raise ValueError(f"unknown isolation mode {mode!r}")
        self.mode, self.device, self.timeout = mode, device, timeout
        self.prestart = prestart or 0
        self.ctx = mp.get_context("spawn")
        self.log_dir = own_scratch(LOGS)
        self.spares = []        # process mode with prestart: idle children, oldest first
        self.workers = {}       # worker mode: solution name -> its persistent child

    def _new_child(self):
        return _Child(self.ctx, self.device, self.mode == "process", self.log_dir)

    def start_workers(self, names):
        """Worker mode: start the children of these solutions now, side by side (each start imports torch and
        makes a CUDA context: seconds), instead of one after another at each solution's first pair, and wait
        until they are ready (at most WORKERS_READY_S). Nothing is timed yet when the loop calls this."""
        if self.mode != "worker":
            return
        started = []
        for name in names:
            if name not in self.workers:
                self.workers[name] = self._new_child()
                started.append(self.workers[name])
        deadline = time.monotonic() + WORKERS_READY_S   # then a pair's clock takes what is left of a start
        for child in started:
            child.wait_ready(deadline)

    def run(self, job):
        if self.mode == "none":
            from harness.eval.child import run_job
            use_triton_interpreter(self.device)
            return run_job(job).to_dict(), ""
        name = job.solution["name"]
        timed_out = TIMED_OUT.format(self.timeout, name)
        if self.mode == "process":
            pair_start = time.monotonic()
            for dead in [c for c in self.spares if not c.proc.is_alive()]:
                dead.close()
                self.spares.remove(dead)
            child = self.spares.pop(0) if self.spares else self._new_child()
            while len(self.spares) < self.prestart:  # opt-in: they start up beside this pair
                self.spares.append(self._new_child())
            clock = max(child.started, pair_start)  # a fresh child: its start; a spare: its pair's start
            ready = child.wait_ready(child.started + READY_LIMIT_S)
            if ready is None:
                return self._crashed(child)
            if not ready:
                return self._timed_out(child, NOT_READY.format(READY_LIMIT_S))
            if time.monotonic() - clock >= self.timeout:
                return self._timed_out(child, timed_out)
        else:
            child = self.workers.pop(name, None)
            if child is None or not child.proc.is_alive():
                child = self._new_child()
            clock = time.monotonic()  # worker mode: from the send (see the module docstring)
        try:
            child.conn.send(job)
            result = child.wait_result(clock + self.timeout)
        except (BrokenPipeError, ConnectionError):
            result = None
        if result is _TIMED_OUT:
            return self._timed_out(child, timed_out)
        if result is None:
            return self._crashed(child)
        log = child.read_log()
        if self.mode == "process":
            child.proc.join(10)
            child.close()
        else:
            self.workers[name] = child  # worker mode: kept for this solution's next job
        return result, log

    @staticmethod
    def _timed_out(child, message):
        child.kill()
        log = child.read_log()
        child.close()
        return {"status": Status.TIMEOUT.value, "message": message}, log

    @staticmethod
    def _crashed(child):
        child.proc.join(5)
        code = child.proc.exitcode
        log = child.read_log()
        child.close()
        return {"status": Status.RUNTIME_ERROR.value,
                "message": f"{CRASHED} (exit code {code})"}, log

    def close(self):
        for c in [*self.spares, *self.workers.values()]:
            try:
                c.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            c.close()
        self.spares, self.workers = [], {}
        try:
            for p in Path(self.log_dir).iterdir():
                p.unlink()
            os.rmdir(self.log_dir)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
