"""`gdn-harness full` (what `make eval` runs) and `gdn-harness bench`: our submission, the FlashInfer baseline
and our extra solutions (the prefill ablation) on every official workload with the official timer, then the
report under results/<gpu>/.

Installs only what is missing and only where a package index answers; on an offline GPU host it runs with what
is importable and names the rest. Without a GPU it says so and points to the CPU correctness check."""
import importlib.util
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import REPO

GPU_PACKAGES = {"flashinfer": "flashinfer-python==0.7.2.post1", "cupti": "cupti-python>=13,<14"}
RESULTS_ROOT = REPO / "results"
BENCH_TARGET_S = 600  # the harness benchmark's target: ours + baseline, 154 workloads, cached references
CPU_HINT = ("Check correctness on the CPU instead (Triton runs through its interpreter), e.g.:\n"
            "  gdn-harness eval --solution examples/gdn_decode_qk4_v8_d128_k_last --device cpu --workloads 0-2\n"
            "  gdn-harness eval --solution ours --definition gdn_decode_qk4_v8_d128_k_last --device cpu --workloads 0")


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
    print(f"missing GPU packages: {', '.join(GPU_PACKAGES[m] for m in missing)}; trying to install them (network)")
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
              "what is importable", file=sys.stderr)
    return still


def _gpu_or_hint(command):
    """The GPU's name, or None after saying that `command` needs one and what to run on a CPU instead."""
    import torch
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    print(f"{command} times kernels and needs a CUDA GPU; none is visible here.\n{CPU_HINT}", file=sys.stderr)
    return None


def start_from_results_cache(out, slug):
    """A folder other than results/<gpu>/ starts from that folder's reference latencies (keyed by GPU, definition,
    workload, input digest, timer and settings, so only matching ones are used): timing them again costs ~40
    minutes of prefill references. Copied whole or not at all; returns the source, or None."""
    cached = RESULTS_ROOT / slug / "reference_latency.json"
    if not cached.exists() or out.resolve() == cached.parent.resolve() or (out / "reference_latency.json").exists():
        return None
    out.mkdir(parents=True, exist_ok=True)
    part = out / "reference_latency.json.part"
    shutil.copy(cached, part)
    part.replace(out / "reference_latency.json")
    return cached


def _solutions(dataset, definition, args, missing):
    from harness.data.jsonio import DataError
    from harness.data.resolve import OUR_AUTHOR, our_extras, resolve

    sols = resolve("ours", definition, dataset)
    try:
        sols += resolve("baseline", definition, dataset)
    except DataError as exc:
        print(f"  no baseline: {exc}")
    if "flashinfer" in missing:
        sols = [s for s in sols if s.author != "baseline"]
        print("  flashinfer is missing: the baseline is skipped", file=sys.stderr)
    if not args.no_extras:
        sols += our_extras(definition)
    if args.peers:
        sols += [s for s in dataset.solutions(definition.name)
                 if s.author not in (OUR_AUTHOR, "baseline") and s.name not in {x.name for x in sols}]
    return sols


def run_full(args, argv):
    """The full pass; `argv`: the subcommand's own arguments (recorded in runs.jsonl)."""
    from harness.cli import exit_status, run_options, workloads_per_definition
    from harness.data.dataset import Dataset
    from harness.eval.options import print_differences
    from harness.eval.console import run_definition
    from harness.data.jsonio import DataError
    from harness.eval.timing_cuda import resolve_timer

    if args.device and not args.device.startswith("cuda"):
        raise DataError("--device", f"the full pass times kernels on a GPU, not on {args.device!r}",
                        "check correctness on the CPU with `gdn-harness eval --device cpu`")
    gpu = _gpu_or_hint("gdn-harness full (make eval)")
    if gpu is None:
        return 2
    missing = ensure_packages()
    try:
        timer = resolve_timer(args.timer)
    except Exception as exc:
        raise DataError("--timer", str(exc)) from None
    dataset = Dataset(args.dataset) if args.dataset else Dataset()
    definitions = [dataset.definition(n) for n in (args.definition or sorted(dataset.definitions))]
    selected = workloads_per_definition(dataset, definitions, args.workloads)
    slug = gpu_slug(gpu)
    out = Path(args.out or RESULTS_ROOT / slug)
    seeded = start_from_results_cache(out, slug)
    print(f"make eval on {gpu} -> {out}/ (timer: {timer})")
    print_differences(*[run_options(args, "cuda", d, out) for d in definitions])
    print(f"  reference latencies are cached in {out / 'reference_latency.json'}"
          + (f" (started from {seeded})" if seeded else "")
          + (f"; uncached ones are timed for at most {args.reference_budget:g} s" if args.reference_budget is not None
             else "; timing the uncached ones has no cap (the prefill reference under CUPTI took ~40 min for all "
                  "100 workloads on an H200): --reference-budget SECONDS caps it"))
    t0 = time.time()
    results = []
    for definition in definitions:
        if definition.name not in selected:
            continue
        sols = _solutions(dataset, definition, args, missing)
        workloads = selected[definition.name]
        opts = run_options(args, "cuda", definition, out)
        t1, stats = time.time(), {}
        try:
            found = run_definition(dataset, definition, workloads, sols, opts, stats, table=False)
        except DataError as exc:    # a damaged input or cache file: named, with what to do
            raise DataError(exc.where, f"{exc.message}; the traces written so far stay in {out}/", exc.hint) from None
        results += [r for r in found if r.solution.name == sols[0].name]   # the exit status: our submission's
        record_run(out, RunRecord(definition, sols, workloads, t1, gpu, argv), args, stats)
    print(f"evaluation took {time.time() - t0:.0f} s")
    if not args.no_report:
        _report(out, definitions, dataset)
    return exit_status(results, args)


@dataclass(frozen=True)
class RunRecord:
    """One pass over a definition, as runs.jsonl records it."""
    definition: object
    solutions: list
    workloads: list
    started: float      # time.time() at the pass's start
    gpu: str
    argv: list


def record_run(out, run, args, stats):
    """Append the pass's own record to out/runs.jsonl: what the reports' run-time tables and the READMEs'
    timings cite, with the per-pair costs (harness/eval/costs.py) in `per_pair`."""
    from harness.data.dataset import append_jsonl
    from harness.eval.environment import harness_commit
    append_jsonl(Path(out) / "runs.jsonl", {
        "definition": run.definition.name, "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(run.started)),
        "wall_s": round(time.time() - run.started, 1), "gpu": run.gpu, "harness": harness_commit(),
        "isolation": args.isolation, "ray": args.ray, "solutions": [s.name for s in run.solutions],
        "workloads": len(run.workloads),
        "reference_output_cache": args.reference_output_cache, "reference_budget_s": args.reference_budget,
        "argv": list(run.argv), **stats})


def run_bench(args):
    """`full` for ours + the baseline in a fresh folder with inputs and reference outputs recomputed and reference
    latencies only looked up (none timed); prints the wall time and appends the pass records to
    results/<gpu>/bench/runs.jsonl."""
    from harness.build.builders import CACHE_ROOT
    from harness.cli import build_parser
    from harness.data.jsonio import DataError

    gpu = _gpu_or_hint("gdn-harness bench (make bench)")
    if gpu is None:
        return 2
    slug = gpu_slug(gpu)
    if args.out and Path(args.out).exists() and any(Path(args.out).iterdir()):
        raise DataError(args.out, "the benchmark needs a fresh folder; this one is not empty",
                        "name another --out (the default .cache/bench/<gpu>/ is emptied by every benchmark)")
    out = Path(args.out or CACHE_ROOT / "bench" / slug)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    argv = ["full", "--out", str(out), "--no-extras", "--no-report", "--no-reference-output-cache", "--no-resume",
            "--reference-budget", "0", "--timer", args.timer, "--workloads", args.workloads,
            *[x for d in (args.definition or []) for x in ("--definition", d)],
            *(["--prepare-jobs", str(args.prepare_jobs)] if args.prepare_jobs else []),
            *(["--quiet"] if args.quiet else []), *(["--dataset", args.dataset] if args.dataset else [])]
    full = build_parser().parse_args(argv)
    seeded = start_from_results_cache(out, slug) or "nowhere"
    print(f"harness benchmark -> {out}/ (reference latencies from {seeded}; target: under {BENCH_TARGET_S} s)")
    t0 = time.time()
    rc = run_full(full, argv[1:])
    took = time.time() - t0
    record = RESULTS_ROOT / slug / "bench" / "runs.jsonl"
    record.parent.mkdir(parents=True, exist_ok=True)
    with open(record, "a") as f:
        f.write((out / "runs.jsonl").read_text())
    print(f"benchmark: {took:.0f} s ({'within' if took < BENCH_TARGET_S else 'OVER'} the {BENCH_TARGET_S} s target); "
          f"recorded in {record}")
    return rc


def _report(out, definitions, dataset):
    from harness.report.compare import write_comparison
    from harness.report.summary import write_report
    from harness.data.resolve import resolve

    report_dir, summary, track, _ = write_report(out, definitions, dataset=dataset)
    for definition in definitions:  # the same run, side by side, ratios to our submission
        base = resolve("ours", definition, dataset)[0].name
        cmp_dir, _, buckets = write_comparison(out, definition, base)
        print(buckets.to_string(index=False, na_rep="-"))
        print(f"comparison: {cmp_dir}/{definition.name}.md")
    print(summary[["definition", "solution", "passed", "workloads", "mean_speedup_vs_reference",
                   "mean_speedup_vs_baseline", "win_rate_vs_baseline", "mean_latency_us",
                   "mean_event_us"]].to_string(index=False, na_rep="-"))
    print(track.to_string(index=False, na_rep="-"))
    print(f"report: {report_dir}/report.md")
