"""The Ray actor that runs pairs, one at a time: one per GPU (or CPU slot). It holds the isolated children of the
solutions it has run (harness/eval/pool.py, as a local run does) and a local copy of each payload it is sent: the
driver puts a payload's bytes in the object store once, so actors on other hosts get them too."""
import dataclasses
import os
import shutil

import ray

from harness.eval.record import host_of
from harness.eval.runners import pool_of, run_timed
from harness.eval.scratch import clear_dead, own_scratch


COPIES = "gdn-ray-payloads-"   # + the actor's pid: the folder of its payload copies


@ray.remote(max_restarts=0, max_concurrency=1)  # the driver replaces a dead actor and writes its pair's trace
class PairActor:
    def __init__(self, opts, driver_sets_omp):
        if not driver_sets_omp:   # Ray's own OMP_NUM_THREADS=1: the children get the driver's environment
            os.environ.pop("OMP_NUM_THREADS", None)
        self.device, self.pool = opts.device, pool_of(opts)
        self.dir = own_scratch(COPIES)     # the copies of killed actors go first
        self.files = {}   # payload key -> its local file

    def ready(self):
        """Where this actor runs: the trace's host fields and a label for the extras."""
        gpus = ray.get_gpu_ids()
        where = f"{ray.util.get_node_ip_address()} " + (f"GPU {','.join(map(str, gpus))}" if gpus
                                                          else f"CPU actor pid {os.getpid()}")
        return host_of(self.device), where

    def run(self, job, key, payload, live):
        """(outcome, log, wall seconds) of `job` on payload `key`; `payload`: [its object ref] (in a list, so Ray
        hands the ref, not the bytes: they are fetched only by an actor that has no copy yet). Copies of payloads
        not in `live` (no pair of theirs left) are removed first."""
        for gone in set(self.files) - set(live):
            os.unlink(self.files.pop(gone))
        if key not in self.files:
            path = os.path.join(self.dir, key)
            with open(path, "wb") as f:
                f.write(ray.get(payload[0]))
            self.files[key] = path
        return run_timed(self.pool, dataclasses.replace(job, payload_path=self.files[key]))

    def close(self):
        self.pool.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        clear_dead(COPIES)   # again: an actor killed just before this one started may not have been reaped then
