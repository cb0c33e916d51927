"""The reference's latency per workload: timed once, cached across runs (a file keyed by GPU, definition,
workload, input digest, timer and settings), filled in later when a budget left it out."""
import time
from pathlib import Path

import torch

from harness.build.builders import CACHE_ROOT
from harness.data.dataset import append_jsonl, extras_path, read_traces, trace_path
from harness.data.jsonio import read_json_object, read_jsonl, write_json_atomic
from harness.eval import environment
from harness.eval.child import TimingConfig, official_timing
from harness.eval.inputs import materialize
from harness.eval.reference import load_reference
from harness.eval.payloads import blobs_and_provenance
from harness.eval.traces import now


# The prefill reference is a Python loop over tokens, ~20 small launches each: one call at T=8192 spans 72-121 s
# under CUPTI on the H200, so timing all 100 prefill references even once costs ~40 minutes. By default it is
# timed with 1 trial of 1 iteration (after the timer's own untimed call and 5-call estimate); printed with every
# run, and --reference-timing official restores the solutions' settings. The decode reference is timed as
# officially.
QUICK_REFERENCE = TimingConfig(warmup=0, iters=1, trials=1)


def reference_quick(definition_name):
    """The quick reference timing of a definition whose reference is slow, else None (as the solutions)."""
    return QUICK_REFERENCE if "prefill" in definition_name else None


def timer_key(timer):
    """The timer as the reference cache keys it: auto and cupti both name the CUPTI span."""
    return "auto" if timer in ("auto", "cupti") else timer


class ReferenceLatencyCache:
    """Reference latencies keyed by (GPU model, definition, uuid, input digest, timer, settings)."""

    def __init__(self, path=CACHE_ROOT / "reference_latency.json"):
        self.path = Path(path)
        # a damaged file is refused, not started over: its timings took GPU minutes
        self.data = read_json_object(self.path, "reference latencies", "repair it, or move it aside to start an "
                                     "empty cache (its latencies are then timed again)")
        self.timed = []     # keys timed by this process (not found in the cache)

    @staticmethod
    def key(*parts):
        return "|".join(str(p) for p in parts)

    def get(self, key):
        return self.data.get(key)

    def put(self, key, value):
        self.data[key] = value
        self.timed.append(key)
        write_json_atomic(self.path, self.data)


def reference_config(definition, opts):
    """The timing settings of the reference: its own, else the solutions', else the official ones."""
    return opts.reference_timing or opts.timing or official_timing(definition.name)


def within_budget(opts, spent):
    return opts.reference_budget_s is None or spent < opts.reference_budget_s


def time_reference(ref, definition, workload, trial_inputs, opts, provenance, cache, measure=True):
    """The reference latency in ms: cached, else timed (if `measure`), else None (not profiled)."""
    from harness.eval import timing as timing_mod

    cfg = reference_config(definition, opts)
    device_name = environment.hardware(opts.device)
    key = cache.key(device_name, definition.name, workload.uuid, provenance["digest"], timer_key(opts.timer),
                    f"{cfg.warmup}/{cfg.iters}/{cfg.trials}")
    hit = cache.get(key)
    if hit is not None or not measure:
        return hit
    per_trial = []
    for t in range(cfg.trials):
        args = [x.to(opts.device) if isinstance(x, torch.Tensor) else x for x in trial_inputs[t % len(trial_inputs)]]
        # not under no_grad: officially the reference is timed as it is called (its outputs are under no_grad)
        per_trial.append(timing_mod.measure(ref, args, cfg, opts.device, opts.timer).median_ms)
    value = sum(per_trial) / len(per_trial)
    cache.put(key, value)
    return value


def seed_reference_cache(cache, out_dir, definition, opts, cfg_label):
    """Reference latencies that this output folder's traces already record (same GPU, inputs, timer and
    settings) count as cached: a resumed run on a fresh machine need not time them again."""
    from harness.eval.timing import timer_label

    ep = extras_path(out_dir, definition.name)
    if not ep.exists():
        return
    label = timer_label(opts.device, opts.timer)
    recorded = {e["workload"]: e["reference_latency_ms"] for _, e in read_jsonl(ep, allow_partial_tail=True)
                if e.get("reference_latency_ms") and e.get("reference_timing") == cfg_label
                and e.get("timer") == label}
    added = 0
    for tp in (Path(out_dir) / "traces").glob(f"*/{definition.op_type}/{definition.name}.jsonl"):
        for tr in read_traces(tp):
            if tr.evaluation is None or tr.workload.uuid not in recorded:
                continue
            env = tr.evaluation.environment
            key = cache.key(env.hardware, definition.name, tr.workload.uuid, env.libs.get("input_digest"),
                            timer_key(opts.timer), cfg_label)
            if cache.get(key) is None:
                cache.data[key] = recorded[tr.workload.uuid]
                added += 1
    if added:
        write_json_atomic(cache.path, cache.data)


def unprofiled_workloads(out_dir, solutions, definition):
    """Workloads whose traces in out_dir passed without a reference latency (a budget ran out) and that no
    later pass has timed: a resumed run times them (budget permitting) even where every pair is done."""
    missing = set()
    for sol in solutions:
        for tr in read_traces(trace_path(out_dir, sol.author, definition.op_type, definition.name)):
            ev = tr.evaluation
            if tr.solution == sol.name and ev is not None and ev.performance is not None \
                    and not ev.performance.reference_latency_ms:
                missing.add(tr.workload.uuid)
    ep = extras_path(out_dir, definition.name)
    if ep.exists():
        missing -= {e["workload"] for _, e in read_jsonl(ep, allow_partial_tail=True) if e.get("record") == "reference"}
    return missing


def reference_record(workload, ref_ms, opts, provenance, label, seconds):
    """An extras line holding a reference latency timed after the workload's pairs (the report fills the
    pairs' speedup vs reference from it and says so; the traces keep what their own pass measured)."""
    from harness.eval.timing import timer_label

    return {"record": "reference", "solution": None, "workload": workload.uuid, "reference_latency_ms": ref_ms,
            "reference_timing": label, "timer": timer_label(opts.device, opts.timer), "inputs": provenance["inputs"],
            "input_digest": provenance["digest"], "hardware": environment.hardware(opts.device),
            "reference_s": round(seconds, 3), "timestamp": now()}


def time_late_reference(dataset, definition, workload, opts, cache, ref_timing_label, bar):
    """Time the reference of a workload whose pairs were done earlier (inputs only, no reference outputs),
    record it in the extras and say so; returns the seconds it took."""
    start = time.monotonic()
    blobs, provenance = blobs_and_provenance(dataset, definition, workload, opts)
    trials = reference_config(definition, opts).trials
    inputs = [materialize(definition, workload, blobs, opts.device, t, opts.seed) for t in range(trials)]
    ref_ms = time_reference(load_reference(definition), definition, workload, inputs, opts, provenance, cache)
    secs = time.monotonic() - start
    append_jsonl(extras_path(opts.out_dir, definition.name),
                 reference_record(workload, ref_ms, opts, provenance, ref_timing_label, secs))
    bar.write(f"{definition.name}: reference latency of {workload.uuid[:8]} (its pairs were done earlier): "
              f"{ref_ms:.4g} ms, timed in {secs:.0f} s")
    return secs
