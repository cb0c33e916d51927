"""The evaluation loop (parent side): per workload, make the trial inputs and reference outputs once,
time the reference, then evaluate every solution on them in isolation and append its trace."""

import datetime
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from harness import environment
from harness.builders import CACHE_ROOT
from harness.correctness import Tolerance
from harness.dataset import append_jsonl, append_jsonl_text, append_trace, extras_path, read_traces, trace_path
from harness.inputs import check_constraints, load_blobs, materialize
from harness.isolation import Runner
from harness.precheck import static_problem
from harness.jsonio import read_json_object, read_jsonl, write_json_atomic, write_text_atomic
from harness.reference import load_reference, run_reference
from harness.runner import Job, TimingConfig, official_timing
from harness.trace import Correctness, Environment, Evaluation, Performance, Status, Trace

DEVIATIONS = [
    "inputs: the official GDN blobs are not public; missing blobs are replaced by seeded stand-ins "
    "(every trace's environment.libs.inputs says which)",
    "random inputs use a recorded seed (--seed); the official harness sets none",
    "reference outputs are computed once per workload when every input comes from a blob or a scalar "
    "(the trials are then identical by construction); the official harness recomputes them per trial",
    "environment.libs carries extra provenance keys (harness, timer, inputs, sm_count, driver)",
    "DPS outputs are filled with NaN before each correctness call (torch.empty otherwise), so a solution that "
    "never writes them cannot pass on leftover memory",
    "after timing, one more call on perturbed inputs written into the same tensors checks for memoized "
    "outputs and host syncs (a warning; a failure with --strict)",
]
PAYLOAD_CACHE_NOTE = ("reference outputs are reused from an earlier run with the same definition, workload, input "
                      "bytes, seed, GPU model and torch version (the payload cache); the official harness recomputes "
                      "them every run")


def print_differences(*runs):
    """The deliberate differences from the official evaluator that apply to a run (the options of each of its
    definitions), printed once at its start."""
    notes = []
    for opts in runs:
        notes += [n for n in differences(opts) if n not in notes]
    print("deliberate differences from the official evaluator:")
    for note in notes:
        print(f"  - {note}")


def differences(opts):
    timing = opts.timing
    notes = list(DEVIATIONS)
    if opts.payload_cache:
        notes.append(f"{PAYLOAD_CACHE_NOTE}: {opts.payload_cache}")
    if opts.isolation == "worker":
        notes.append("each solution runs in one persistent child (restarted after a crash), not a fresh process per "
                     "pair; --isolation process for the official mode")
    if opts.reference_timing:
        notes.append("the prefill reference is timed with 1 trial of 1 iteration (its Python loop is slow); "
                     "--reference-timing official times it as the solutions")
    if not opts.device.startswith("cuda"):
        notes.append("CPU device: a correctness check; latencies are wall-clock and NOT official, so no speedups "
                     "or scores are shown" + ("" if opts.profile_baseline else ", and the reference is not timed"))
        if timing is not None:
            notes.append(f"CPU device: {timing.warmup} warmup, {timing.iters} timed call(s) per trial, "
                         f"{timing.trials} trial(s) (pass --warmup/--iterations/--trials for more)")
    return notes


@dataclass
class EvalOptions:
    device: str = "cpu"
    out_dir: Path = Path("results/local")
    timeout: float = 300.0
    tolerance: Tolerance = Tolerance()
    timing: TimingConfig | None = None          # None: the official settings per definition
    reference_timing: TimingConfig | None = None
    profile_baseline: bool = True
    resume: bool = False
    seed: int = 0
    isolation: str = "process"
    timer: str = "auto"
    synthesize: bool = True
    show_progress: bool = True
    strict: bool = False
    prestart: int | None = None                 # idle children kept ready (None: see Runner)
    reference_cache: Path | None = None         # reference latency cache file (None: .cache/)
    reference_budget_s: float | None = None     # stop timing uncached references after this many seconds
    payload_cache: Path | None = None           # keep inputs + reference outputs here for later runs (None: off)
    prepare_jobs: int = 1                       # processes preparing payloads before the loop (1: in the loop)


@dataclass
class PairResult:
    workload: object
    solution: object
    trace: Trace
    warnings: list = field(default_factory=list)
    skipped: bool = False
    trace_file: Path | None = None


def not_passed(results):
    """The pairs evaluated (not skipped) whose status is not PASSED."""
    return [r for r in results if not r.skipped and r.trace.evaluation.status != Status.PASSED]


def solution_digest(solution):
    """What resume and the traces key a solution by: its spec and sources (not its name, author or
    description), so an edited solution is evaluated again and two different ones under one name differ."""
    body = {"definition": solution.definition, "spec": solution.spec.to_json(),
            "sources": [[s.path, s.content] for s in solution.sources]}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def _now():
    return datetime.datetime.now().isoformat()  # local time, no zone: as officially


def _digest(files):
    h = hashlib.sha256()
    for p in files:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


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


PAYLOAD_VERSION = 1  # bump when what a payload holds, or how, changes


def payload_key(definition, workload, digest, opts, trials):
    """What a payload depends on: the definition (its reference), the workload, the input bytes, seed,
    trial count, GPU model and torch version."""
    parts = [definition.to_json(), workload.to_json(), digest, opts.seed, trials, environment.hardware(opts.device),
             torch.__version__, PAYLOAD_VERSION]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def default_prepare_jobs():
    """Half the cores, at most 8 (each preparer holds a CUDA context and a copy of the inputs)."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def payload_path(cache_dir, definition, workload, digest, opts, trials):
    key = payload_key(definition, workload, digest, opts, trials)
    return Path(cache_dir) / f"{definition.name}-{workload.uuid}-{key}.pt"


def _blobs(dataset, definition, workload, opts):
    blobs = load_blobs(dataset, definition, workload, synthesize=opts.synthesize)
    provenance = {"inputs": "stand-in" if blobs.standin else ("real" if blobs.files else "random"),
                  "digest": _digest(blobs.files) if blobs.files else f"seed{opts.seed}"}
    return blobs, provenance


def prepare_workload(dataset, definition, workload, opts, cache_dir):
    """Trial inputs (CPU copies) and reference outputs, written to (or found in) `cache_dir`; returns
    (payload path, provenance dict, ref fn, inputs)."""
    blobs, provenance = _blobs(dataset, definition, workload, opts)
    timing = opts.timing or official_timing(definition.name)
    random = any(s.type == "random" for s in workload.inputs.values())
    ref = load_reference(definition)
    path = payload_path(cache_dir, definition, workload, provenance["digest"], opts, timing.trials)
    if path.exists():
        try:
            trials_in = torch.load(path, map_location="cpu", weights_only=False)["inputs"]
            return path, provenance, ref, trials_in
        except Exception:  # a damaged entry is recomputed
            path.unlink(missing_ok=True)
    trials_in, trials_out = [], []
    for t in range(timing.trials):
        if t and not random:
            trials_in.append(trials_in[0])
            trials_out.append(trials_out[0])
            continue
        inputs = materialize(definition, workload, blobs, opts.device, t, opts.seed)
        if t == 0:
            check_constraints(definition, workload, inputs, f"workload {workload.uuid}")
        with torch.no_grad():
            outs = run_reference(ref, definition, inputs)
        trials_in.append([x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs])
        trials_out.append([o.cpu() for o in outs])
    fresh_in = perturb(trials_in[0], opts.seed)
    with torch.no_grad():
        fresh_out = run_reference(ref, definition, [x.to(opts.device) if isinstance(x, torch.Tensor) else x
                                                    for x in fresh_in])
    payload = {"inputs": trials_in, "outputs": trials_out,
               "fresh": {"inputs": fresh_in, "outputs": [o.cpu() for o in fresh_out]}}
    # whole or absent: written aside, then renamed (a parallel preparer may write the same entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path, provenance, ref, trials_in


def _prepare_in_child(root, definition_name, workload, opts, cache_dir):
    """One payload, in a preparer process; returns (uuid, seconds, error text or None)."""
    from harness.dataset import Dataset

    start = time.monotonic()
    try:
        dataset = Dataset(root)
        prepare_workload(dataset, dataset.definition(definition_name), workload, opts, cache_dir)
        return workload.uuid, time.monotonic() - start, None
    except Exception as exc:  # the serial pass meets it again and reports it in context
        return workload.uuid, time.monotonic() - start, f"{type(exc).__name__}: {exc}"


def prepare_in_parallel(dataset, definition, workloads, opts, cache_dir):
    """Inputs and reference outputs of `workloads` in `opts.prepare_jobs` processes at once, before any
    timing starts (the reference is a host-bound loop of small launches: the GPU has room for several, and
    nothing is being timed yet). Returns {uuid: seconds that workload took in its process}."""
    import concurrent.futures
    import multiprocessing

    jobs = min(opts.prepare_jobs, len(workloads))
    seconds = {}
    bar = tqdm(total=len(workloads), desc=f"{definition.name}: preparing ({jobs} processes)", unit="workload",
               disable=not opts.show_progress, mininterval=0.1 if sys.stderr.isatty() else 30.0,
               ascii=not sys.stderr.isatty())
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_prepare_in_child, dataset.root, definition.name, w, opts, cache_dir)
                   for w in workloads]
        for fut in concurrent.futures.as_completed(futures):
            uuid, secs, error = fut.result()
            seconds[uuid] = secs
            if error:
                print(f"{definition.name}: preparing {uuid} failed in its process ({error}); it is retried in order")
            bar.update(1)
    bar.close()
    return seconds


def perturb(inputs, seed):
    """Inputs a solution has not seen: floating tensors scaled elementwise by 1 + 0.05 N(0, 1) (shapes,
    dtypes, integer tensors such as cu_seqlens and scalars kept), for the memoization check."""
    gen = torch.Generator().manual_seed(seed + 7919)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            noise = torch.randn(x.shape, generator=gen, dtype=torch.float32)
            x = (x.float() * (1 + 0.05 * noise)).to(x.dtype)
        out.append(x)
    return out


def reference_config(definition, opts):
    """The timing settings of the reference: its own, else the solutions', else the official ones."""
    return opts.reference_timing or opts.timing or official_timing(definition.name)


def _within_budget(opts, spent):
    return opts.reference_budget_s is None or spent < opts.reference_budget_s


def time_reference(ref, definition, workload, trial_inputs, opts, provenance, cache, measure=True):
    """The reference latency in ms: cached, else timed (if `measure`), else None (not profiled)."""
    from harness import timing as timing_mod

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
        with torch.no_grad():
            per_trial.append(timing_mod.measure(ref, args, cfg, opts.device, opts.timer, event_time=False).median_ms)
    value = sum(per_trial) / len(per_trial)
    cache.put(key, value)
    return value


def seed_reference_cache(cache, out_dir, definition, opts, cfg_label):
    """Reference latencies that this output folder's traces already record (same GPU, inputs, timer and
    settings) count as cached: a resumed run on a fresh machine need not time them again."""
    from harness.timing import timer_label

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
    from harness.timing import timer_label

    return {"record": "reference", "solution": None, "workload": workload.uuid, "reference_latency_ms": ref_ms,
            "reference_timing": label, "timer": timer_label(opts.device, opts.timer), "inputs": provenance["inputs"],
            "input_digest": provenance["digest"], "hardware": environment.hardware(opts.device),
            "reference_s": round(seconds, 3), "timestamp": _now()}


def done_pairs(out_dir, solutions, definition):
    """(name, uuid) of the pairs traced in out_dir for the same solution content."""
    done = set()
    for sol in solutions:
        digest = solution_digest(sol)
        for tr in read_traces(trace_path(out_dir, sol.author, definition.op_type, definition.name)):
            if tr.solution == sol.name and tr.evaluation is not None \
                    and tr.evaluation.environment.libs.get("solution_digest") == digest:
                done.add((sol.name, tr.workload.uuid))
    return done


def stale_path(out_root, author, op_type, definition_name):
    """Where traces that no longer describe their solution go: out of traces/, so no report reads them."""
    return Path(out_root) / "stale" / author / op_type / f"{definition_name}.jsonl"


def retire_traces(out_dir, definition, solutions, workloads, resume):
    """Move out of traces/ every trace of these solutions that a report must not read: those written for other
    content under the same name (an edited solution, or another one named alike) and, without resume, those of the
    pairs about to be evaluated again. They go to <out>/stale/ (appended there first, so nothing is lost if this is
    killed); returns {solution name: (traces of other content, traces replaced)}."""
    uuids = {w.uuid for w in workloads}
    moved = {}
    for author in sorted({s.author for s in solutions}):
        path = trace_path(out_dir, author, definition.op_type, definition.name)
        if not path.exists():
            continue
        digests = {s.name: solution_digest(s) for s in solutions if s.author == author}
        keep, retire = [], []
        text = path.read_text(encoding="utf-8")
        for line in text[: text.rfind("\n") + 1].splitlines(keepends=True):
            obj = json.loads(line) if line.strip() else {}
            name = obj.get("solution")
            if name not in digests or not obj.get("evaluation"):
                keep.append(line)
                continue
            other = (obj["evaluation"].get("environment") or {}).get("libs", {}).get("solution_digest") != digests[name]
            again = not resume and obj["workload"]["uuid"] in uuids
            if other or again:
                retire.append(line)
                counts = moved.setdefault(name, [0, 0])
                counts[0 if other else 1] += 1
            else:
                keep.append(line)
        if not retire:
            continue
        stale = stale_path(out_dir, author, definition.op_type, definition.name)
        for line in retire:
            append_jsonl_text(stale, line)
        write_text_atomic(path, "".join(keep))
    return {k: tuple(v) for k, v in moved.items()}


def make_trace(definition, workload, solution, outcome, log, ref_ms, env):
    status = Status(outcome["status"])
    correctness = performance = None
    if status in (Status.PASSED, Status.INCORRECT_NUMERICAL):
        correctness = Correctness(outcome.get("max_rel", 0.0), outcome.get("max_abs", 0.0))
    if status == Status.PASSED:
        lat = outcome.get("latency_ms")
        if lat is None:
            lat = 0.0
        speedup = ref_ms / lat if ref_ms and lat else 0.0
        performance = Performance(lat, ref_ms or 0.0, speedup)
    text = log
    extra = outcome.get("message", "")
    if extra:  # as officially: the log, then the evaluator's message on its own line
        text = f"{log}\n{extra}" if log else extra
    for w in outcome.get("warnings", []):
        text += f"\n[harness warning] {w}"
    evaluation = Evaluation(status, env, _now(), text, correctness, performance)
    return Trace(definition.name, workload, solution.name, evaluation)


def evaluate(dataset, definition, workloads, solutions, opts, stats=None):
    """Evaluate solutions on workloads, interleaved per workload. Returns PairResults in order; `stats`
    (a dict, if given) receives the run's own times: parallel preparation, reference timing, whole loop."""
    out_dir = Path(opts.out_dir)
    authors = {s.name: s.author for s in solutions}
    for name, (other, again) in retire_traces(out_dir, definition, solutions, workloads, opts.resume).items():
        where = stale_path(out_dir, authors[name], definition.op_type, definition.name)
        if other:
            print(f"{definition.name}: {name}: {other} trace(s) in {out_dir} were written for other content under "
                  f"this name (edited since, or another solution named alike): moved to {where}; evaluated again")
        if again:
            print(f"{definition.name}: {name}: {again} earlier trace(s) of the pairs evaluated again (--no-resume) "
                  f"moved to {where}")
    done = done_pairs(out_dir, solutions, definition) if opts.resume else set()
    rejected = {}
    for sol in solutions:
        problem = static_problem(sol, definition)
        if problem and any((sol.name, w.uuid) not in done for w in workloads):
            rejected[sol.name] = problem
            print(f"{definition.name}: {sol.name}: COMPILE_ERROR on every workload, found in its sources before "
                  f"any child started: {problem}")
    cache = ReferenceLatencyCache(opts.reference_cache) if opts.reference_cache else ReferenceLatencyCache()
    results = []
    ref_cfg = reference_config(definition, opts)
    ref_timing_label = f"{ref_cfg.warmup}/{ref_cfg.iters}/{ref_cfg.trials}" if opts.profile_baseline else "not timed"
    if opts.profile_baseline and opts.resume:
        seed_reference_cache(cache, out_dir, definition, opts, ref_timing_label)
    run_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gdn-payload-") as payload_dir:
        cache_dir = opts.payload_cache or payload_dir   # without a cache, payloads live for this run only
        need = [w for w in workloads if any((s.name, w.uuid) not in done for s in solutions)]
        prepared = {}
        if opts.prepare_jobs > 1 and len(need) > 1:
            t = time.monotonic()
            prepared = prepare_in_parallel(dataset, definition, need, opts, cache_dir)
            if stats is not None:
                stats["parallel_prepare_s"] = round(time.monotonic() - t, 3)
        # On a terminal a live bar; in a log file (a GPU job) one line every 30 s at most.
        tty = sys.stderr.isatty()
        bar = tqdm(total=len(workloads) * len(solutions), desc=definition.name, unit="pair",
                   disable=not opts.show_progress, leave=True, mininterval=0.1 if tty else 30.0, ascii=not tty)
        late = unprofiled_workloads(out_dir, solutions, definition) if opts.resume and opts.profile_baseline else set()
        with Runner(opts.isolation, opts.device, opts.timeout, opts.prestart) as runner:
            ref_spent, ref_skipped = _loop(dataset, definition, workloads, solutions, opts, done, cache, runner,
                                           cache_dir, prepared, bar, results, ref_timing_label, late, rejected)
        bar.close()
    if stats is not None:
        stats.update(reference_timing_s=round(ref_spent, 3), loop_s=round(time.monotonic() - run_start, 3),
                     pairs=sum(not r.skipped for r in results), prepare_jobs=opts.prepare_jobs,
                     references_timed=len(cache.timed))
    if cache.timed:
        print(f"{definition.name}: {len(cache.timed)} reference latencies timed in this run (cached in {cache.path})")
    if ref_skipped:
        print(f"{definition.name}: the reference-timing budget ({opts.reference_budget_s:g} s) ran out; "
              f"{ref_skipped} workloads have no reference latency (reported as not profiled). Run again to "
              "time more: timed ones are cached.")
    return results


def _time_late_reference(dataset, definition, workload, opts, cache, ref_timing_label, bar):
    """Time the reference of a workload whose pairs were done earlier (inputs only, no reference outputs),
    record it in the extras and say so; returns the seconds it took."""
    start = time.monotonic()
    blobs, provenance = _blobs(dataset, definition, workload, opts)
    trials = reference_config(definition, opts).trials
    inputs = [materialize(definition, workload, blobs, opts.device, t, opts.seed) for t in range(trials)]
    ref_ms = time_reference(load_reference(definition), definition, workload, inputs, opts, provenance, cache)
    secs = time.monotonic() - start
    append_jsonl(extras_path(opts.out_dir, definition.name),
                 reference_record(workload, ref_ms, opts, provenance, ref_timing_label, secs))
    bar.write(f"{definition.name}: reference latency of {workload.uuid[:8]} (its pairs were done earlier): "
              f"{ref_ms:.4g} ms, timed in {secs:.0f} s")
    return secs


def _loop(dataset, definition, workloads, solutions, opts, done, cache, runner, cache_dir, prepared, bar, results,
          ref_timing_label, late, rejected):
    """The per-workload loop of evaluate(): returns (seconds spent timing references, references not timed).
    `late`: workloads whose earlier traces lack a reference latency; timed here (budget permitting) and
    recorded in the extras. `rejected`: {solution name: why its build fails}, traced without a child."""
    ref_spent, ref_skipped = 0.0, 0
    out_dir = Path(opts.out_dir)
    tty = sys.stderr.isatty()
    timing = opts.timing or official_timing(definition.name)
    for workload in workloads:
        todo = [s for s in solutions if (s.name, workload.uuid) not in done]
        for s in solutions:
            if s not in todo:
                results.append(PairResult(workload, s, None, skipped=True))
                bar.update(1)
        if not todo:
            if workload.uuid in late and _within_budget(opts, ref_spent):
                ref_spent += _time_late_reference(dataset, definition, workload, opts, cache, ref_timing_label, bar)
            elif workload.uuid in late:
                ref_skipped += 1
            continue
        prep_start = time.monotonic()
        path, provenance, ref, trial_inputs = prepare_workload(dataset, definition, workload, opts, cache_dir)
        ref_ms, reference_s = None, 0.0
        if opts.profile_baseline:
            measure = _within_budget(opts, ref_spent)
            ref_start = time.monotonic()
            ref_ms = time_reference(ref, definition, workload, trial_inputs, opts, provenance, cache, measure)
            reference_s = time.monotonic() - ref_start
            ref_spent += reference_s
            ref_skipped += ref_ms is None
            if ref_ms is not None and workload.uuid in late:  # earlier pairs of this workload lack it
                append_jsonl(extras_path(out_dir, definition.name), reference_record(
                    workload, ref_ms, opts, provenance, ref_timing_label, reference_s))
        prepare_s = time.monotonic() - prep_start  # inputs, reference outputs, reference timing (reference_s)
        for sol in todo:
            job = Job(definition.to_json(), sol.to_json(), workload.to_json(), str(path), opts.device,
                      opts.tolerance, timing, opts.timer, strict=opts.strict)
            pair_start = time.monotonic()
            if sol.name in rejected:
                outcome, log = {"status": Status.COMPILE_ERROR.value, "message": rejected[sol.name]}, ""
            else:
                outcome, log = runner.run(job)
            wall_s = time.monotonic() - pair_start
            libs = dict(environment.libs(opts.device))
            libs["inputs"] = provenance["inputs"]
            libs["input_digest"] = provenance["digest"]
            libs["solution_digest"] = solution_digest(sol)
            if outcome.get("timer"):
                libs["timer"] = outcome["timer"]
            env = Environment(environment.hardware(opts.device), libs)
            trace = make_trace(definition, workload, sol, outcome, log, ref_ms, env)
            trace_file = trace_path(out_dir, sol.author, definition.op_type, definition.name)
            append_trace(trace_file, trace)
            append_jsonl(extras_path(out_dir, definition.name), {
                "solution": sol.name, "author": sol.author, "workload": workload.uuid,
                "solution_digest": libs["solution_digest"],
                "status": outcome["status"], "latency_ms": outcome.get("latency_ms"),
                "event_ms": outcome.get("event_ms"), "timer": outcome.get("timer"),
                "reference_latency_ms": ref_ms,
                "reference_timing": ref_timing_label if ref_ms is not None else "not timed",
                "inputs": provenance["inputs"], "warnings": outcome.get("warnings", []),
                "wall_s": round(wall_s, 3), "prepare_s": round(prepare_s, 3),
                "reference_s": round(reference_s, 3),
                "parallel_prepare_s": (round(prepared[workload.uuid], 3) if workload.uuid in prepared
                                       else None)})
            res = PairResult(workload, sol, trace, outcome.get("warnings", []), trace_file=trace_file)
            results.append(res)
            bar.update(1)
            bar.set_postfix_str(f"{sol.name}: {outcome['status']}", refresh=tty)
        if not opts.payload_cache:
            os.unlink(path)
    return ref_spent, ref_skipped


def fmt_float(x, spec=".3g"):
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def _official(trace):
    """Whether a trace's latency is from a GPU timer (a CPU wall clock gives no official figure)."""
    from harness.timing import CPU_LABEL
    return trace.evaluation.environment.libs.get("timer") != CPU_LABEL


def summary_table(results):
    """The per-workload table printed at the end of a run ('-' for speedups not officially timed)."""
    rows = [f"{'#':>3} {'workload':<10} {'axes':<40} {'solution':<22} {'status':<20} {'max_abs':>9} {'max_rel':>9} "
            f"{'lat_ms':>9} {'speedup':>8}"]
    for i, r in enumerate(results):
        if r.skipped:
            continue
        ev = r.trace.evaluation
        c, p = ev.correctness, ev.performance
        speedup = p.speedup_factor if p and _official(r.trace) else None
        axes = ",".join(f"{k}={v}" for k, v in r.workload.axes.items())
        rows.append(f"{i:>3} {r.workload.uuid[:8]:<10} {axes[:40]:<40} {r.solution.name[:22]:<22} {ev.status.value:<20} "
                    f"{fmt_float(c.max_absolute_error if c else None):>9} {fmt_float(c.max_relative_error if c else None):>9} "
                    f"{fmt_float(p.latency_ms if p else None, '.4f'):>9} {fmt_float(speedup, '.2f'):>8}")
    return "\n".join(rows)


def failure_reason(log, limit=4):
    """The lines of a trace log that say why a pair failed: the evaluator's message and the end of the last
    traceback (where it was raised, and what), at most `limit` lines."""
    lines = [x.rstrip() for x in log.splitlines() if x.strip() and not x.startswith("[harness warning]")]
    if not lines:
        return ["(no log: see the trace)"]
    start = max((i for i, x in enumerate(lines) if x.startswith("Traceback (most recent call last)")), default=None)
    if start is None:
        return lines[-limit:]
    head = [x for x in lines[:start] if x.startswith(("Build error", "Error"))][-1:]
    return head + lines[start + 1:][-(limit - len(head)):]


def print_failures(results, limit=20):
    """Every pair of this run that did not pass: its reason and its trace file (the first `limit` in full)."""
    bad = not_passed(results)
    for r in bad[:limit]:
        ev = r.trace.evaluation
        print(f"  {ev.status.value}: {r.solution.name} on {r.workload.uuid[:8]}")
        for line in failure_reason(ev.log):
            print(f"      {line[:300]}")
        print(f"      trace: {r.trace_file}")
    if len(bad) > limit:
        print(f"  ... and {len(bad) - limit} more not PASSED (their traces say why)")


def run_definition(dataset, definition, workloads, solutions, opts, stats=None, table=True):
    """evaluate() with what the console shows: the plan, the per-workload table, every failure's reason and a
    one-line summary."""
    print(f"{definition.name}: {len(workloads)} workloads x {[s.name for s in solutions]} on {opts.device}; "
          f"traces -> {opts.out_dir}/traces/")
    results = evaluate(dataset, definition, workloads, solutions, opts, stats)
    if table:
        print(summary_table(results))
    print_failures(results)
    done = [r for r in results if not r.skipped]
    inputs = sorted({r.trace.evaluation.environment.libs.get("inputs", "?") for r in done})
    print(f"{definition.name}: {len(done)} pairs evaluated ({len(results) - len(done)} skipped: already traced for "
          f"the same content), {len(done) - len(not_passed(results))} PASSED, {len(not_passed(results))} not; "
          f"inputs: {', '.join(inputs) or '-'}")
    return results
