"""Pairs on Ray actors (--ray). The driver (this process) makes each workload's payload and reference latency once
(harness/eval/loop.py), puts the payload's bytes in the object store, hands pairs to idle actors, one pair at a time
each, and writes every result as it arrives (harness/eval/record.py), so a killed driver resumes as a local run does.

An actor that dies gives its pair RUNTIME_ERROR, one that does not answer in time TIMEOUT, with the official
messages of a child that does so (harness/eval/pool.py); it is replaced, and no other pair is affected."""
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.data.jsonio import DataError
from harness.data.trace import Status
from harness.dist.cluster import actor_count, actor_env, connect
from harness.eval import environment
from harness.eval.pool import CRASHED, READY_LIMIT_S, TIMED_OUT
from harness.eval.record import Ran

LOG_CHARS = 4000  # of a dead actor's error, kept in its pair's log


def payload_key(pair):
    """A payload's name, unique per workload and inputs (harness/eval/payloads.py), on the driver and the actors."""
    return Path(pair.job.payload_path).name


def choose(names, warm, held):
    """The index of the pending pair (by solution name, in submission order) an idle actor takes: the first of a
    solution whose child it holds (no start-up, no build); else the first of the solution the fewest actors hold,
    so that solutions' first pairs, and their builds, go to different actors."""
    return min(range(len(names)), key=lambda i: (0, 0, i) if names[i] in warm else (1, held[names[i]], i))


@dataclass
class Slot:
    """One actor's place: the actor in it now, the solutions whose children it holds, its pair in flight."""
    actor: object = None
    asked: float = 0.0           # when this actor was asked for
    ready: object = None         # its ready() ref until it answers
    host: dict | None = None     # host_of() on the actor's machine
    where: str | None = None     # its node and GPU, for the extras
    warm: set = field(default_factory=set)
    pair: object = None
    future: object = None
    sent: float = 0.0


class RayRunner:
    """The runner of harness/eval/runners.py for --ray: submit() queues a pair, results are recorded as they come."""

    def __init__(self, opts, recorder):
        self.opts, self.recorder = opts, recorder
        self.ray = connect(opts.ray)
        from harness.dist.actor import PairActor

        cuda = opts.device.startswith("cuda")
        self.actor_class = PairActor.options(**({"num_gpus": 1} if cuda else {"num_cpus": 1}),
                                             runtime_env={"env_vars": actor_env()})
        n = actor_count(self.ray, opts.ray, opts.device)
        # a pair's own limit is --timeout (after the 30 s start limit in process mode); beyond it plus the grace,
        # the actor itself is stuck
        self.limit = opts.timeout + opts.ray.grace_s + (READY_LIMIT_S if opts.isolation == "process" else 0)
        self.harness = environment.libs(opts.device)["harness"]
        self.slots = [self._start(Slot()) for _ in range(n)]
        self.pending = []    # pairs submitted and not yet handed to an actor, in submission order
        self.payloads = {}   # payload key -> [object ref of its bytes, pairs of it not yet recorded]
        print(f"Ray: {n} actor(s), one {'GPU' if cuda else 'CPU'} each, on the cluster at "
              f"{self.ray.get_runtime_context().gcs_address}")

    def _start(self, slot):
        slot.actor = self.actor_class.remote(self.opts, "OMP_NUM_THREADS" in os.environ)
        slot.ready, slot.asked, slot.warm = slot.actor.ready.remote(), time.monotonic(), set()
        return slot

    def start(self, names):
        """Nothing to start ahead: each actor starts a solution's child at the first pair it takes of it."""

    def submit(self, pair):
        key = payload_key(pair)
        if key not in self.payloads:  # read now: the loop may remove the file once the workload's pairs are in
            self.payloads[key] = [self.ray.put(Path(pair.job.payload_path).read_bytes()), 0]
        self.payloads[key][1] += 1
        self.pending.append(pair)
        self._dispatch()
        while len(self.pending) >= len(self.slots):  # enough queued: the next workload is made when it is needed
            self._wait()

    def drain(self):
        while self.pending or any(s.future for s in self.slots):
            self._wait()

    def _dispatch(self):
        for slot in self.slots:
            if not self.pending:
                return
            if slot.ready is None and slot.future is None:
                held = Counter(name for s in self.slots for name in s.warm)
                pair = self.pending.pop(choose([p.solution.name for p in self.pending], slot.warm, held))
                key = payload_key(pair)
                slot.pair, slot.sent = pair, time.monotonic()
                slot.future = slot.actor.run.remote(pair.job, key, [self.payloads[key][0]], list(self.payloads))
                slot.warm.add(pair.solution.name)

    def _wait(self):
        """Wait for one answer (a result, or a new actor ready) or the first deadline, and act on it."""
        waiting = {s.future or s.ready: s for s in self.slots if s.future or s.ready}
        deadlines = [s.sent + self.limit if s.future else s.asked + self.opts.ray.start_s for s in waiting.values()]
        done, _ = self.ray.wait(list(waiting), num_returns=1, timeout=max(0.0, min(deadlines) - time.monotonic()))
        for ref in done:
            if waiting[ref].future:
                self._result(waiting[ref])
            else:
                self._ready(waiting[ref])
        if not done:
            self._expire()
        self._dispatch()

    def _ready(self, slot):
        try:
            slot.host, slot.where = self.ray.get(slot.ready)
        except self.ray.exceptions.RayActorError as exc:
            raise DataError("--ray", f"a Ray actor failed to start: {str(exc)[:LOG_CHARS]}") from None
        slot.ready = None
        theirs = slot.host["libs"]["harness"]
        if theirs != self.harness:
            raise DataError("--ray", f"the actor on {slot.where} runs harness {theirs}, this process {self.harness}",
                            "every host of the cluster needs this checkout, at the same path")

    def _result(self, slot):
        pair, wall_s = slot.pair, time.monotonic() - slot.sent
        try:
            ran = Ran(*self.ray.get(slot.future), slot.host, slot.where)
        except self.ray.exceptions.RayActorError as exc:  # its process ended (killed, OOM, node lost) or is unreachable
            ran = Ran({"status": Status.RUNTIME_ERROR.value, "message": f"{CRASHED} (its Ray actor died)"},
                      f"[harness] the Ray actor on {slot.where} died: {str(exc)[:LOG_CHARS]}", wall_s, slot.host,
                      slot.where)
            self.ray.kill(slot.actor)   # one only unreachable may still run: no two actors share a GPU
            self._start(slot)
        slot.pair = slot.future = None
        self._record(pair, ran)

    def _expire(self):
        now = time.monotonic()
        for slot in self.slots:
            if slot.ready is not None and now >= slot.asked + self.opts.ray.start_s:
                raise DataError("--ray", f"a Ray actor was not ready {self.opts.ray.start_s:g} s after it was "
                                "asked for", "the cluster may lack free GPUs/CPUs (other jobs?): see `ray status`")
            if slot.future is not None and now >= slot.sent + self.limit:
                pair = slot.pair
                self.ray.kill(slot.actor)
                ran = Ran({"status": Status.TIMEOUT.value, "message": TIMED_OUT.format(self.opts.timeout,
                                                                                        pair.solution.name)},
                          f"[harness] the Ray actor on {slot.where} did not answer within {self.limit:g} s: killed",
                          now - slot.sent, slot.host, slot.where)
                slot.pair = slot.future = None
                self._start(slot)
                self._record(pair, ran)

    def _record(self, pair, ran):
        self.recorder.record(pair, ran)
        entry = self.payloads[payload_key(pair)]
        entry[1] -= 1
        if not entry[1]:  # every pair of it is recorded: its bytes may leave the object store
            del self.payloads[payload_key(pair)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        idle = [s.actor.close.remote() for s in self.slots if s.ready is None and s.future is None]
        try:
            if idle:  # their children end and their payload copies go; a busy actor is only killed
                self.ray.wait(idle, num_returns=len(idle), timeout=30)
        finally:
            for slot in self.slots:
                self.ray.kill(slot.actor)
