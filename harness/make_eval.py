"""`make eval`: our submission, the FlashInfer baseline (and our extra solutions, e.g. the prefill
ablation) on every official workload, with the official timer, then the report under results/<gpu>/.

Installs only what is missing and only where a package index answers; on an offline GPU host it runs
with what is importable and names the rest. Without a GPU it says so and does not pretend to time."""
import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.cli import positive_int
from harness.shard import parse_shard
from harness.runner import TimingConfig

DEFINITIONS = ("gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last")
GPU_PACKAGES = {"flashinfer": "flashinfer-python==0.7.2.post1", "cupti": "cupti-python>=13,<14"}
OUR_AUTHOR = "gdn-harness"
# The prefill reference is a Python loop over tokens, ~20 small launches each. Measured on the H200: one
# call at T=8192 spans 72-121 s under CUPTI (its per-launch tracing), its untraced calls 2.6-5.2 s; timing all
# 100 prefill workloads even once costs about 40 minutes of one GPU. So make eval times the prefill reference with 1 trial of 1 iteration
# (after FlashInfer's own untimed call and 5-call estimate), caches each figure in the results folder, and
# can cap the time spent (--reference-budget). Printed with every run; --reference-timing official
# restores the official settings.
QUICK_REFERENCE = TimingConfig(warmup=0, iters=1, trials=1)
SLOW_REFERENCES = {"gdn_prefill_qk4_v8_d128_k_last"}  # the decode reference is timed as officially


RESULTS_ROOT = Path(__file__).resolve().parent.parent / "results"
BENCH_TARGET_S = 600  # the harness benchmark's target (issue P2): ours + baseline, 154 workloads, cached references


def gpu_slug(name):
    """The results folder of a GPU: its model up to the first word with a digit, e.g. 'NVIDIA H200' ->
    'h200', 'NVIDIA H100 80GB HBM3' -> 'h100', 'NVIDIA GeForce RTX 4090' -> 'geforce-rtx-4090'."""
    words = [w.lower() for w in re.split(r"[\s_-]+", name.replace("NVIDIA", "")) if w]
    cut = next((i for i, w in enumerate(words) if any(c.isdigit() for c in w)), len(words) - 1)
    return "-".join(words[:cut + 1]) or "gpu"


def ensure_packages():
    missing = [m for m in GPU_PACKAGES if importlib.util.find_spec(m) is None]
    if not missing:
        return []
    print(f"missing GPU packages: {', '.join(GPU_PACKAGES[m] for m in missing)}; trying to install them")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--timeout", "10", "--retries", "0",
           *[GPU_PACKAGES[m] for m in missing]]
    try:
        subprocess.run(cmd, timeout=900)  # what is importable afterwards is what counts
    except (OSError, subprocess.SubprocessError):
        pass
    importlib.invalidate_caches()
    still = [m for m in GPU_PACKAGES if importlib.util.find_spec(m) is None]
    if still:
        print(f"could not install {', '.join(GPU_PACKAGES[m] for m in still)} (no package index?); running with "
              "what is importable. Offline bundle: ../shared/gpu-kit/README.md")
    return still


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.make_eval", description=__doc__)
    ap.add_argument("--out", help="results folder (default: results/<gpu>, e.g. results/h200)")
    ap.add_argument("--definitions", default=",".join(DEFINITIONS), help="comma-separated definition names")
    ap.add_argument("--timer", choices=["auto", "events"], default="auto")
    ap.add_argument("--reference-timing", choices=["quick", "official"], default="quick")
    ap.add_argument("--no-resume", action="store_true", help="re-evaluate pairs that already have traces")
    ap.add_argument("--workloads", default="all")
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument("--no-extras", action="store_true",
                    help="only ours and the baseline (not our other solutions in the dataset, e.g. the ablation)")
    ap.add_argument("--peers", action="store_true",
                    help="also evaluate the other authors' solutions in the dataset (e.g. the FLA peers)")
    ap.add_argument("--isolation", choices=["process", "worker"], default="worker",
                    help="worker (default): one persistent child per solution, restarted after a crash; process "
                         "(official): a fresh child per pair, several times slower (child start-up) and with "
                         "children starting beside the timed calls")
    ap.add_argument("--no-reference-output-cache", action="store_true",
                    help="recompute reference outputs every run (default: kept in .cache/payloads/ and reused)")
    ap.add_argument("--prepare-jobs", type=positive_int, default=None, metavar="N",
                    help="processes that make the inputs and reference outputs before timing starts (default: half "
                         "the cores, at most 8; 1: one workload at a time inside the loop)")
    ap.add_argument("--reference-budget", type=float, default=None, metavar="SECONDS",
                    help="stop timing uncached references after this many seconds (the rest are reported as not "
                         "profiled; timed ones are cached in <out>/reference_latency.json for the next run)")
    ap.add_argument("--bench", action="store_true",
                    help="the harness benchmark: ours + baseline on every workload in a fresh folder under .cache/bench/, "
                         "inputs and reference outputs recomputed, reference latencies only looked up in "
                         "results/<gpu>/reference_latency.json (none timed); prints the wall time and appends the pass "
                         "records to results/<gpu>/bench/runs.jsonl")
    ap.add_argument("--gpus", type=positive_int, default=1, metavar="N",
                    help="spread the workloads over the first N visible GPUs of this host, one child make_eval "
                         "each (in a copy of the results folder, merged back afterwards)")
    ap.add_argument("--shard", type=parse_shard, default=None, metavar="K/N",
                    help="evaluate only share K of N of the selected workloads (what --gpus gives each child)")
    args = ap.parse_args(argv)
    if args.bench and args.gpus > 1:
        ap.error("--bench measures one process on one GPU; drop --gpus")
    if args.shard and args.gpus > 1:
        ap.error("--gpus N gives each child its --shard; pass one or the other")
    if args.bench:  # what the benchmark measures is fixed; only --definitions/--workloads/--prepare-jobs apply
        args.no_extras = args.no_report = args.no_reference_output_cache = args.no_resume = True
        args.peers, args.reference_budget = False, 0.0

    import torch
    if not torch.cuda.is_available():
        print("make eval times kernels and needs a CUDA GPU; none is visible here.\n"
              "Check correctness on the CPU instead (Triton runs through its interpreter), e.g.:\n"
              "  python -m harness eval --definition gdn_decode_qk4_v8_d128_k_last --solution ours --device cpu "
              "--workloads 0-2")
        return 2
    if args.gpus > 1 and args.gpus > torch.cuda.device_count():
        print(f"error: --gpus {args.gpus}, but {torch.cuda.device_count()} GPU(s) are visible here")
        return 2
    missing = ensure_packages()
    from harness.cli import select_workloads
    from harness.dataset import Dataset, append_jsonl
    from harness.builders import CACHE_ROOT
    from harness.environment import harness_commit
    from harness.evaluate import DEVIATIONS, PAYLOAD_CACHE_NOTE, EvalOptions, default_prepare_jobs, evaluate
    from harness.jsonio import DataError
    from harness.solution_loader import resolve
    from harness.timing_cuda import resolve_timer

    try:
        timer = resolve_timer(args.timer)
    except Exception as exc:
        print(f"error: {exc}")
        return 2
    if not args.no_extras and args.shard is None:   # a --gpus child: its parent regenerated it
        from harness.package import write_ablation
        print(f"ablation solution regenerated from submission/: {write_ablation()}")
    dataset = Dataset()
    slug = gpu_slug(torch.cuda.get_device_name())
    out = Path(args.out or RESULTS_ROOT / slug)
    if args.bench:
        if args.out and Path(args.out).exists() and any(Path(args.out).iterdir()):
            print(f"error: --bench needs a fresh folder; {args.out} is not empty (the default .cache/bench/<gpu>/ is "
                  "emptied by every benchmark)")
            return 2
        out = Path(args.out or CACHE_ROOT / "bench" / slug)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    # A folder other than results/<gpu>/ starts from that folder's reference latencies (keyed by GPU, definition,
    # workload, input digest, timer and settings, so only matching ones are used): timing them again costs ~40
    # minutes of prefill references, and --reference-budget 0 would leave them out.
    cached = RESULTS_ROOT / slug / "reference_latency.json"
    seeded = cached.exists() and out.resolve() != cached.parent.resolve() \
        and not (out / "reference_latency.json").exists()
    if seeded:      # copied whole or not at all
        out.mkdir(parents=True, exist_ok=True)
        part = out / "reference_latency.json.part"
        shutil.copy(cached, part)
        part.replace(out / "reference_latency.json")
    if args.bench:
        print(f"harness benchmark -> {out}/ (reference latencies from {cached if seeded else 'nowhere'}; "
              f"target: under {BENCH_TARGET_S} s)")
    print(f"make eval on {torch.cuda.get_device_name()} -> {out}/ (timer: {timer})")
    for d in DEVIATIONS:
        print(f"  deliberate difference: {d}")
    if not args.no_reference_output_cache:
        print(f"  deliberate difference: {PAYLOAD_CACHE_NOTE}: {CACHE_ROOT / 'payloads'}")
    if args.reference_timing == "quick":
        print("  deliberate difference: the prefill reference is timed with 1 trial of 1 iteration (its Python loop "
              "is slow); --reference-timing official for 1/5/3")
    if args.isolation == "worker":
        print("  deliberate difference: each solution runs in one persistent child (restarted after a crash), not "
              "a fresh process per pair; --isolation process for the official mode")
    print(f"  reference latencies are cached in {out / 'reference_latency.json'}"
          + (f" (started from {cached})" if seeded and not args.bench else "")
          + (f"; uncached ones are timed for at most {args.reference_budget:g} s" if args.reference_budget is not None
             else "; timing the uncached ones has no cap (the prefill reference under CUPTI took ~40 min for all "
                  "100 workloads on an H200): --reference-budget SECONDS caps it, --gpus N spreads it"))
    t0 = time.time()
    if args.gpus > 1:
        from harness.shard import run_sharded
        print(f"  deliberate difference: the workloads are spread over {args.gpus} GPUs of this host, evaluated side "
              "by side by one child each (the official harness uses one GPU)")
        try:
            rc = run_sharded(sys.argv[1:] if argv is None else list(argv), out, args.gpus,
                             CACHE_ROOT / "shards" / slug, args.prepare_jobs or max(1, default_prepare_jobs() // args.gpus))
        except (DataError, RuntimeError) as exc:   # the merge refused: the children's folders are kept
            print(f"error: {exc} (the children's results stay in {CACHE_ROOT / 'shards' / slug})")
            return 2
        print(f"evaluation took {time.time() - t0:.0f} s on {args.gpus} GPUs")
        if not args.no_report:
            definitions = [dataset.definition(name) for name in args.definitions.split(",")]
            _report(out, definitions, [(d, resolve("ours", d, dataset)[0].name) for d in definitions], dataset)
        return rc
    definitions, bases = [], []
    for name in args.definitions.split(","):
        definition = dataset.definition(name)
        definitions.append(definition)
        sols = resolve("ours", definition, dataset)
        bases.append((definition, sols[0].name))
        try:
            sols += resolve("baseline", definition, dataset)
        except DataError as exc:
            print(f"  no baseline: {exc}")
        if "flashinfer" in missing:
            sols = [s for s in sols if s.author != "baseline"]
            print("  flashinfer is missing: the baseline is skipped")
        if not args.no_extras:
            sols += [s for s in dataset.solutions(name)
                     if s.author == OUR_AUTHOR and s.name not in {x.name for x in sols}]
        if args.peers:
            sols += [s for s in dataset.solutions(name)
                     if s.author not in (OUR_AUTHOR, "baseline") and s.name not in {x.name for x in sols}]
        workloads = select_workloads(dataset.workloads(definition), args.workloads)
        if args.shard:
            from harness.shard import shard_workloads
            workloads = shard_workloads(workloads, *args.shard)
        opts = EvalOptions(device="cuda", out_dir=out, resume=not args.no_resume, timer=args.timer,
                           reference_timing=(QUICK_REFERENCE if args.reference_timing == "quick"
                                             and name in SLOW_REFERENCES else None),
                           isolation=args.isolation, reference_cache=out / "reference_latency.json",
                           reference_budget_s=args.reference_budget,
                           payload_cache=None if args.no_reference_output_cache else CACHE_ROOT / "payloads",
                           prepare_jobs=args.prepare_jobs or default_prepare_jobs())
        print(f"{name}: {len(workloads)} workloads x {[s.name for s in sols]}")
        t1, stats = time.time(), {}
        try:
            results = evaluate(dataset, definition, workloads, sols, opts, stats)
        except DataError as exc:    # a damaged input or cache file: named, with what to do
            print(f"error: {exc}\n  the traces written so far stay in {out}/", file=sys.stderr)
            return 2
        done = [r for r in results if not r.skipped]
        bad = [r for r in done if r.trace.evaluation.status.value != "PASSED"]
        print(f"{name}: {len(done)} pairs in {time.time() - t1:.0f} s, {len(bad)} not PASSED")
        # the run's own record (runs.jsonl): what the report's run-time table and the README's timings cite
        append_jsonl(out / "runs.jsonl", {
            "definition": name, "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t1)),
            "wall_s": round(time.time() - t1, 1), "gpu": torch.cuda.get_device_name(), "harness": harness_commit(),
            "isolation": args.isolation, "solutions": [s.name for s in sols], "workloads": len(workloads),
            "reference_output_cache": not args.no_reference_output_cache, "reference_budget_s": args.reference_budget,
            "argv": sys.argv[1:] if argv is None else list(argv), **stats})
        for r in bad[:20]:
            print(f"  {r.solution.name} {r.workload.uuid[:8]} {r.trace.evaluation.status.value}: "
                  f"{r.trace.evaluation.log[-300:]}")
    took = time.time() - t0
    print(f"evaluation took {took:.0f} s")
    if args.bench:
        lines = (out / "runs.jsonl").read_text()
        record = RESULTS_ROOT / slug / "bench" / "runs.jsonl"
        record.parent.mkdir(parents=True, exist_ok=True)
        with open(record, "a") as f:
            f.write(lines)
        print(f"benchmark: {took:.0f} s for {', '.join(d.name for d in definitions)} "
              f"({'within' if took < BENCH_TARGET_S else 'OVER'} the {BENCH_TARGET_S} s target); recorded in {record}")
    if not args.no_report:
        _report(out, definitions, bases, dataset)
    return 0


def _report(out, definitions, bases, dataset):
    from harness.compare import write_comparison
    from harness.report import write_report

    report_dir, summary, track, _ = write_report(out, definitions, dataset=dataset)
    for definition, base in bases:  # the same run, side by side, ratios to our submission
        cmp_dir, _, buckets = write_comparison(out, definition, base)
        print(buckets.to_string(index=False))
        print(f"comparison: {cmp_dir}/{definition.name}.md")
    print(summary[["definition", "solution", "passed", "workloads", "mean_speedup_vs_reference",
                   "mean_speedup_vs_baseline", "win_rate_vs_baseline", "mean_latency_us",
                   "mean_event_us"]].to_string(index=False))
    print(track.to_string(index=False))
    print(f"report: {report_dir}/report.md")


if __name__ == "__main__":
    raise SystemExit(main())
