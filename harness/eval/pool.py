"""Run jobs in isolated processes: a fresh spawned child per (workload, solution) pair, with a
wall-clock timeout covering build and everything after it.

A crash of the child (segfault, CUDA illegal access, os._exit) becomes RUNTIME_ERROR with the
child's log; a child still running at the deadline is killed and becomes TIMEOUT. To hide process
start-up (importing torch and FlashInfer, creating a CUDA context: ~9 s on the H200 host, longer than
most pairs take), `prestart` spare children are started ahead of time and wait, idle, for their job;
each child still serves exactly one job.

Modes: "process" (the official isolated runner), "worker" (one persistent child per solution, restarted
after a crash: no start-up per pair, and nothing else starting beside a timed call), "none" (in this
process: debugging only)."""
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

from harness.data.trace import Status

LOG_LIMIT = 5 * 1024 * 1024  # bytes of child output kept in a trace log: the head, as officially


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
    from harness.eval.child import run_job  # the slow part of start-up (torch), done while idle

    if device.startswith("cuda"):
        _warm_up_cuda()
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


def _warm_up_cuda():
    """Start-up work every CUDA child repeats (CUDA context, Triton, FlashInfer's timer and CUPTI), done
    while the spare waits, so a pair's wall time is its own work. Failures are left for the job to meet."""
    import importlib

    import torch
    torch.cuda.init()
    torch.empty(1, device="cuda")  # creates the context without launching a kernel beside a timed one
    for module in ("triton", "flashinfer.testing", "cupti"):
        try:
            importlib.import_module(module)
        except Exception:
            pass


class _Child:
    def __init__(self, ctx, device, one_shot, log_dir):
        fd, self.log_path = tempfile.mkstemp(prefix="child-", suffix=".log", dir=log_dir)
        os.close(fd)
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=_child_main, args=(child_conn, self.log_path, device, one_shot),
                                daemon=True)
        self.proc.start()
        child_conn.close()
        self.log_offset = 0

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
    """The children that run Job objects (by isolation mode); run() returns (outcome dict, log text)."""

    def __init__(self, mode="process", device="cpu", timeout=300.0, prestart=None):
        if mode not in ("process", "worker", "none"):
            raise ValueError(f"unknown isolation mode {mode!r}")
        self.mode, self.device, self.timeout = mode, device, timeout
        # CUDA children take ~9 s to start against ~1-2 s of work per pair; a CPU host running tests
        # has few cores to spare
        cores = os.cpu_count() or 2
        self.prestart = prestart if prestart is not None else (
            min(8, max(1, cores // 2)) if device.startswith("cuda") else 1)
        self.ctx = mp.get_context("spawn")
        self.log_dir = tempfile.mkdtemp(prefix="gdn-harness-logs-")
        self.spares = []        # process mode: idle children, oldest first
        self.workers = {}       # worker mode: solution name -> its persistent child

    def _new_child(self):
        return _Child(self.ctx, self.device, self.mode == "process", self.log_dir)

    def run(self, job):
        if self.mode == "none":
            from harness.eval.child import run_job
            use_triton_interpreter(self.device)
            return run_job(job).to_dict(), ""
        if self.mode == "process":
            for dead in [c for c in self.spares if not c.proc.is_alive()]:
                dead.close()
                self.spares.remove(dead)
            child = self.spares.pop(0) if self.spares else self._new_child()
            while len(self.spares) < self.prestart:  # they start up while this job runs
                self.spares.append(self._new_child())
        else:
            name = job.solution["name"]
            child = self.workers.pop(name, None)
            if child is None or not child.proc.is_alive():
                child = self._new_child()
        start = time.monotonic()
        try:
            child.conn.send(job)
            result = None
            while True:
                left = self.timeout - (time.monotonic() - start)
                if left <= 0:
                    child.kill()
                    log = child.read_log()
                    child.close()
                    return ({"status": Status.TIMEOUT.value,
                             "message": f"Evaluation timeout after {self.timeout:g} seconds for solution "
                                        f"{job.solution['name']}"}, log)
                if child.conn.poll(min(left, 0.5)):
                    try:
                        result = child.conn.recv()
                    except (EOFError, ConnectionError):
                        result = None
                    break
                if not child.proc.is_alive() and not child.conn.poll(0):
                    break
        except (BrokenPipeError, ConnectionError):
            result = None
        if result is None:
            child.proc.join(5)
            code = child.proc.exitcode
            log = child.read_log()
            child.close()
            return ({"status": Status.RUNTIME_ERROR.value,
                     "message": f"Worker process failed unexpectedly (exit code {code})"}, log)
        log = child.read_log()
        if self.mode == "process":
            child.proc.join(10)
            child.close()
        else:
            self.workers[job.solution["name"]] = child  # worker mode: kept for this solution's next job
        return result, log

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
