"""The evaluation loop (parent side): per workload, make the trial inputs and reference outputs once, time the
reference, then evaluate every solution on them in isolation and append its trace."""
import os
import tempfile
import time
from pathlib import Path

from harness.build.precheck import static_problem
from harness.build.prebuild import Prebuild
from harness.data.dataset import append_jsonl, extras_path
from harness.data.trace import Status
from harness.eval.child import Job, official_timing
from harness.eval.costs import summarize
from harness.eval.environment import hardware
from harness.eval.give_up import GiveUp, earlier
from harness.eval.options import default_prepare_jobs
from harness.eval.out_lock import writing_into
from harness.eval.payloads import prepare_in_parallel, prepare_workload
from harness.eval.record import Pair, Prepared, Recorder
from harness.eval.reference import ReferenceFailed
from harness.eval.reference_latency import (ReferenceLatencyCache, reference_config, reference_record,
                                             seed_reference_cache, time_late_reference, time_reference,
                                             unprofiled_workloads, within_budget)
from harness.eval.runners import open_runner
from harness.eval import state_copy
from harness.eval.traces import RunKey, eval_settings, kept_pairs, retire_traces, stale_path
from harness.progress import progress


def not_passed(results):
    """The pairs whose trace, written in this run or kept from an earlier one (resume), is not PASSED."""
    return [r for r in results if r.trace is not None and r.trace.evaluation.status != Status.PASSED]


def official_order(solutions):
    """The solutions of one definition in the order FlashInfer-Bench runs them within a workload: the sorted paths of
    their JSON files, solutions/<author>/<op_type>/<definition>/<name>.json, so by author, then file name."""
    return sorted(solutions, key=lambda s: (s.author, f"{s.name}.json"))


def run_key(definition, opts):
    """This run's hardware and settings (traces.RunKey): what a kept trace must share with it."""
    return RunKey(hardware(opts.device), eval_settings(opts, opts.timing or official_timing(definition.name)))


def evaluate(dataset, definition, workloads, solutions, opts, stats=None):
    """Evaluate solutions on workloads, interleaved per workload (within one, in FlashInfer-Bench's order:
    official_order). Returns PairResults in the order given (workloads, then solutions); `stats`
    (a dict, if given) receives the run's own times: parallel preparation, reference timing, whole loop. No other
    run may write into opts.out_dir meanwhile (out_lock)."""
    with writing_into(opts.out_dir):
        return _evaluate(dataset, definition, workloads, solutions, opts, stats)


def _evaluate(dataset, definition, workloads, solutions, opts, stats):
    out_dir = Path(opts.out_dir)
    if opts.device.startswith("cuda:"):   # the reference is timed here: on the run's GPU, as in the children
        import torch
        torch.cuda.set_device(torch.device(opts.device))
    authors = {s.name: s.author for s in solutions}
    run = run_key(definition, opts)
    for name, (other, elsewhere, again) in retire_traces(out_dir, definition, solutions, workloads, opts,
                                                         run).items():
        where = stale_path(out_dir, authors[name], definition.op_type, definition.name)
        if other:
            print(f"{definition.name}: {name}: {other} trace(s) in {out_dir} were written for other content under "
                  f"this name (edited since, or another solution named alike): moved to {where}; evaluated again")
        if elsewhere:
            print(f"{definition.name}: {name}: {elsewhere} trace(s) in {out_dir} were written on other hardware or "
                  f"with other settings than this run's ({run.hardware}; {run.settings}): moved to {where}; "
                  "evaluated again")
        if again:
            print(f"{definition.name}: {name}: {again} earlier trace(s) of the pairs evaluated again (--no-resume) "
                  f"moved to {where}")
    for sol in solutions:
        if sol.spec.language == "tilelang":
            print(f"{definition.name}: {sol.name}: a TileLang solution gets COMPILE_ERROR here (deliberate difference: "
                  "the harness has no TileLang builder; FlashInfer-Bench builds it where tilelang is importable)")
    done = kept_pairs(out_dir, solutions, definition, run) if opts.resume else {}
    rejected = {}
    for sol in solutions:
        problem = static_problem(sol, definition, device=opts.device)
        if problem and any((sol.name, w.uuid) not in done for w in workloads):
            rejected[sol.name] = problem
            print(f"{definition.name}: {sol.name}: COMPILE_ERROR on every workload, found in its sources before "
                  f"any child started: {problem}")
    to_build = [s for s in solutions
                if s.name not in rejected and any((s.name, w.uuid) not in done for w in workloads)]
    builds = Prebuild(to_build, default_prepare_jobs())
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
        _report_builds(builds, definition, stats)
        bar = progress(len(workloads) * len(solutions), definition.name, "pair", disable=not opts.show_progress)
        late = unprofiled_workloads(out_dir, solutions, definition) if opts.resume and opts.profile_baseline else set()
        recorder = Recorder(definition, opts, ref_timing_label, bar, results)
        give_up = GiveUp(definition, opts.give_up, results, earlier(out_dir, solutions, definition, run)
                         if opts.resume else None) if opts.give_up else None
        with open_runner(opts, recorder) as runner:
            runner.start([s.name for s in solutions if s.name not in rejected
                          and any((s.name, w.uuid) not in done for w in workloads)])
            ref_spent, ref_skipped = _loop(dataset, definition, workloads, solutions, opts, done, cache, runner,
                                           cache_dir, prepared, recorder, late, rejected, give_up)
        bar.close()
    order = {(w.uuid, s.name): i for i, (w, s) in enumerate((w, s) for w in workloads for s in solutions)}
    results.sort(key=lambda r: order[(r.workload.uuid, r.solution.name)])  # Ray records them as they arrive
    if stats is not None:
        stats.update(reference_timing_s=round(ref_spent, 3), loop_s=round(time.monotonic() - run_start, 3),
                     pairs=sum(not r.skipped for r in results), not_run=sum(bool(r.not_run) for r in results),
                     prepare_jobs=opts.prepare_jobs,
                     references_timed=len(cache.timed),
                     per_pair=summarize([r.cost for r in results if r.cost is not None]))
    if cache.timed:
        print(f"{definition.name}: {len(cache.timed)} reference latencies timed in this run (cached in {cache.path})")
    if ref_skipped:
        print(f"{definition.name}: the reference-timing budget ({opts.reference_budget_s:g} s) ran out; "
              f"{ref_skipped} workloads have no reference latency (reported as not profiled). Run again to "
              "time more: timed ones are cached.")
    return results


def _report_builds(builds, definition, stats):
    """Wait for the native builds started before the payloads, and say what they did."""
    built = builds.wait()
    if not built:
        return
    spent = time.monotonic() - builds.started
    failed = [name for name, (error, _) in built.items() if error]
    print(f"{definition.name}: {len(built)} native solution(s) built side by side in {spent:.0f} s before any pair "
          f"(deliberate difference: officially a build counts against its pair's timeout)"
          + (f"; {len(failed)} failed and are built again by their children: {', '.join(failed)}" if failed else ""))
    if stats is not None:
        stats["prebuild_s"] = round(spent, 3)
        stats["build_s"] = {name: round(seconds, 1) for name, (_, seconds) in built.items()}


def _loop(dataset, definition, workloads, solutions, opts, done, cache, runner, cache_dir, prepared, recorder, late,
          rejected, give_up):
    """The per-workload loop of evaluate(): returns (seconds spent timing references, references not timed).
    `late`: workloads whose earlier traces lack a reference latency; timed here (budget permitting) and
    recorded in the extras. `rejected`: {solution name: why its build fails}, traced without a child.
    `give_up`: a GiveUp (harness/eval/give_up.py) or None."""
    ref_spent, ref_skipped = 0.0, 0
    out_dir = Path(opts.out_dir)
    ref_timing_label, bar = recorder.label, recorder.bar
    timing = opts.timing or official_timing(definition.name)
    in_order = official_order(solutions)
    # --state-copy: the workloads still to time it on (a resumed run keeps what the extras hold)
    copy_todo = set() if not opts.state_copy else \
        {w.uuid for w in workloads} - (state_copy.recorded(out_dir, definition, opts) if opts.resume else set())
    for workload in workloads:
        todo = [s for s in in_order if (s.name, workload.uuid) not in done]
        for s in solutions:
            if s not in todo:
                recorder.skipped(workload, s, done[(s.name, workload.uuid)])
        if not todo:
            if workload.uuid in copy_todo:
                state_copy.time_and_record(dataset, definition, workload, opts)
            if workload.uuid in late and within_budget(opts, ref_spent):
                try:
                    ref_spent += time_late_reference(dataset, definition, workload, opts, cache, ref_timing_label,
                                                     bar)
                except ReferenceFailed as exc:
                    print(f"{definition.name}: workload {workload.uuid}: its reference latency is not timed: "
                          f"{exc.why} ({exc})")
            elif workload.uuid in late:
                ref_skipped += 1
            continue
        prep_start = time.monotonic()
        try:
            path, provenance, ref, trial_inputs = prepare_workload(dataset, definition, workload, opts, cache_dir)
        except ReferenceFailed as exc:   # as officially: the workload is skipped, no solution gets a trace
            print(f"{definition.name}: workload {workload.uuid} skipped, no trace written: {exc.why} ({exc})")
            recorder.bar.update(len(todo))
            continue
        ref_ms, reference_s = None, 0.0
        if opts.profile_baseline:
            measure = within_budget(opts, ref_spent)
            ref_start = time.monotonic()
            ref_ms = time_reference(ref, definition, workload, trial_inputs, opts, provenance, cache, measure)
            reference_s = time.monotonic() - ref_start
            ref_spent += reference_s
            ref_skipped += ref_ms is None
            if ref_ms is not None and workload.uuid in late:  # earlier pairs of this workload lack it
                append_jsonl(extras_path(out_dir, definition.name), reference_record(
                    workload, ref_ms, opts, provenance, ref_timing_label, reference_s))
        if workload.uuid in copy_todo:
            state_copy.time_and_record(dataset, definition, workload, opts, (provenance, trial_inputs[0]))
        prep = Prepared(workload, provenance, ref_ms, time.monotonic() - prep_start, reference_s,
                        prepared.get(workload.uuid))
        for sol in todo:
            why = give_up and give_up.why(sol, workload)
            if why:
                recorder.not_run(workload, sol, why)
                continue
            pair = Pair(prep, sol, Job(definition.to_json(), sol.to_json(), workload.to_json(), str(path), opts.device,
                                       opts.tolerance, timing, opts.timer, strict=opts.strict))
            if sol.name in rejected:
                recorder.rejected(pair, rejected[sol.name])
            else:
                runner.submit(pair)  # Ray reads the payload file here, so it may go once all are submitted
        if not opts.payload_cache:
            os.unlink(path)
    runner.drain()
    return ref_spent, ref_skipped
