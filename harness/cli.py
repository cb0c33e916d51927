"""Command line: python -m harness eval|... (see README.md)."""
import argparse
import sys
from pathlib import Path

from harness.correctness import DEFAULT_ATOL, DEFAULT_MATCHED_RATIO, DEFAULT_RTOL, Tolerance
from harness.jsonio import DataError


def positive_int(text):
    """argparse type: an integer >= 1 (e.g. a number of processes)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def select_workloads(workloads, selector):
    """'all', indices '0,3', ranges '0-2', uuids or uuid prefixes, comma-separated, in file order."""
    if not selector or selector == "all":
        return list(workloads)
    picked = []
    for part in (p.strip() for p in selector.split(",")):
        if not part:
            continue
        if part.replace("-", "").isdigit() and part.count("-") <= 1 and not part.startswith("-"):
            lo, _, hi = part.partition("-")
            lo, hi = int(lo), int(hi or lo)
            if not (0 <= lo <= hi < len(workloads)):
                raise DataError("--workloads", f"range {part!r} outside 0-{len(workloads) - 1}")
            picked.extend(range(lo, hi + 1))
        else:
            hits = [i for i, w in enumerate(workloads) if w.uuid.startswith(part)]
            if len(hits) != 1:
                raise DataError("--workloads", f"{part!r} matches {len(hits)} workload uuids; need exactly one")
            picked.extend(hits)
    seen = set()
    return [workloads[i] for i in picked if not (i in seen or seen.add(i))]


def _eval_args(p):
    p.add_argument("--definition", required=True, help="definition name, e.g. gdn_decode_qk4_v8_d128_k_last")
    p.add_argument("--workloads", default="all", help="indices, ranges and uuids: '0-2', '0,5', 'abcd1234'")
    p.add_argument("--dataset", default=None, help="dataset root (default: the repo's workloads/)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    p.add_argument("--out", default=None, help="output folder for traces (default: results/local)")
    p.add_argument("--resume", action="store_true", help="skip pairs that already have a trace in --out")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per pair, build included (default 300)")
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL)
    p.add_argument("--rtol", type=float, default=DEFAULT_RTOL)
    p.add_argument("--required-matched-ratio", type=float, default=DEFAULT_MATCHED_RATIO)
    p.add_argument("--warmup", type=int, help="override the official warmup calls")
    p.add_argument("--iterations", type=int, help="override the official timed iterations")
    p.add_argument("--trials", type=int, help="override the official trials")
    p.add_argument("--no-profile-baseline", action="store_true", help="do not time the reference")
    p.add_argument("--reference-output-cache", action="store_true",
                   help="keep each workload's inputs and reference outputs in .cache/payloads/ and reuse them in "
                        "later runs (keyed by definition, workload, input bytes, seed, GPU model, torch version)")
    p.add_argument("--reference-budget", type=float, default=None, metavar="SECONDS",
                   help="stop timing uncached references after this many seconds (the rest: not profiled)")
    p.add_argument("--prepare-jobs", type=positive_int, default=1, metavar="N",
                   help="make inputs and reference outputs in N processes before timing starts (default 1: one "
                        "workload at a time, inside the loop)")
    p.add_argument("--isolation", choices=["process", "worker", "none"], default="process",
                   help="process: fresh subprocess per pair (official); worker: one persistent child")
    p.add_argument("--timer", choices=["auto", "cupti", "events"], default="auto",
                   help="CUDA timer; 'events' is not the official timer and is labelled so")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (recorded)")
    p.add_argument("--strict", action="store_true",
                   help="fail (INCORRECT_NUMERICAL) a solution that is wrong on fresh inputs after timing")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--prestart", type=int, default=None,
                   help="child processes started ahead and kept idle (default on CUDA: half the cores, at most 8; 1 on CPU)")


def _setup(args, solution_args):
    """Dataset, definition, workloads, solutions and options shared by eval and compare."""
    import torch

    from harness.dataset import Dataset
    from harness.evaluate import EvalOptions
    from harness.builders import CACHE_ROOT
    from harness.runner import TimingConfig, official_timing
    from harness.solution_loader import resolve

    dataset = Dataset(args.dataset) if args.dataset else Dataset()
    definition = dataset.definition(args.definition)
    workloads = select_workloads(dataset.workloads(definition), args.workloads)
    solutions = [s for arg in solution_args for s in resolve(arg, definition, dataset)]
    names = [s.name for s in solutions]
    if len(set(names)) != len(names):
        raise DataError("--solution", f"two solutions share a name: {names}")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DataError("--device", "CUDA is not available on this machine", "use --device cpu")
    if device.startswith("cuda"):
        from harness.timing_cuda import resolve_timer
        try:
            resolve_timer(args.timer)
        except Exception as exc:
            raise DataError("--timer", str(exc)) from None
    official = official_timing(definition.name)
    timing = TimingConfig(args.warmup if args.warmup is not None else official.warmup,
                          args.iterations if args.iterations is not None else official.iters,
                          args.trials if args.trials is not None else official.trials)
    opts = EvalOptions(device=device, out_dir=Path(args.out or "results/local"), timeout=args.timeout,
                       tolerance=Tolerance(args.atol, args.rtol, args.required_matched_ratio), timing=timing,
                       profile_baseline=not args.no_profile_baseline, resume=args.resume, seed=args.seed,
                       isolation=args.isolation, timer=args.timer, show_progress=not args.quiet,
                       strict=args.strict, prestart=args.prestart,
                       reference_budget_s=args.reference_budget, prepare_jobs=args.prepare_jobs,
                       payload_cache=CACHE_ROOT / "payloads" if args.reference_output_cache else None)
    return dataset, definition, workloads, solutions, opts


def _run(dataset, definition, workloads, solutions, opts):
    from harness.evaluate import DEVIATIONS, PAYLOAD_CACHE_NOTE, evaluate, summary_table

    print(f"definition {definition.name}: {len(workloads)} workloads x {len(solutions)} solutions on {opts.device}; "
          f"traces -> {opts.out_dir}/traces/")
    print("deliberate differences from the official evaluator:")
    for d in DEVIATIONS:
        print(f"  - {d}")
    if opts.payload_cache:
        print(f"  - {PAYLOAD_CACHE_NOTE}: {opts.payload_cache}")
    if not opts.device.startswith("cuda"):
        print("  - CPU device: latencies are wall-clock and NOT official figures")
    results = evaluate(dataset, definition, workloads, solutions, opts)
    print(summary_table(results))
    done = [r for r in results if not r.skipped]
    failed = [r for r in done if r.trace.evaluation.status.value != "PASSED"]
    inputs = sorted({r.trace.evaluation.environment.libs.get("inputs", "?") for r in done})
    print(f"{len(done)} pairs evaluated ({len(results) - len(done)} skipped by --resume), "
          f"{len(done) - len(failed)} PASSED, {len(failed)} not; inputs: {', '.join(inputs) or '-'}")
    return results


def cmd_eval(args):
    _run(*_setup(args, args.solution))
    return 0


def cmd_compare(args):
    from harness.compare import write_comparison

    if len(args.solutions) < 2:
        raise DataError("compare", "name at least two solutions")
    dataset, definition, workloads, solutions, opts = _setup(args, args.solutions)
    base = args.base or solutions[0].name
    if base not in {s.name for s in solutions}:
        raise DataError("--base", f"{base!r} is not one of {[s.name for s in solutions]}")
    _run(dataset, definition, workloads, solutions, opts)
    out, summary, buckets = write_comparison(opts.out_dir, definition, base)
    print(summary.to_string(index=False))
    print(buckets.to_string(index=False))
    print(f"comparison report: {out}/{definition.name}.md")
    return 0


def cmd_report(args):
    from harness.dataset import Dataset
    from harness.report import load_rows, write_report

    dataset = Dataset(args.dataset) if args.dataset else Dataset()
    definitions = [dataset.definition(n) for n in args.definition]
    for run in args.runs:
        if not (Path(run) / "traces").is_dir():
            raise DataError(run, "no traces/ folder: not an output folder of the harness")
    df = load_rows(args.runs, definitions)
    if df.empty:
        raise DataError(", ".join(args.runs), "holds no traces for these definitions")
    timers = sorted(set(df.timer[df.latency_us.notna()]))  # failed pairs were not timed
    if len(timers) > 1 and not args.allow_mixed_timers:
        raise DataError("report", f"these runs used different timers {timers}; their figures are not comparable",
                        "pass --allow-mixed-timers to merge them anyway (each row keeps its timer)")
    out, summary, track, _ = write_report(args.out, definitions, sources=args.runs, dataset=dataset)
    print(summary.drop(columns=["provenance"]).to_string(index=False))
    if args.base:
        from harness.compare import write_comparison
        for definition in definitions:
            present = set(df.solution[df.definition == definition.name])
            for base in [b for b in args.base if b in present]:
                cmp_dir, _, buckets = write_comparison(args.out, definition, base, sources=args.runs)
                print(buckets.to_string(index=False))
                print(f"comparison: {cmp_dir}/{definition.name}.md")
    print(f"report: {out}/report.md")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("eval", help="evaluate solutions on a definition's workloads")
    _eval_args(p)
    p.add_argument("--solution", action="append", required=True,
                   help="solution .json, starter-kit folder, dataset root, or reference / ours / baseline (repeatable)")
    p.set_defaults(func=cmd_eval)
    p = sub.add_parser("compare", help="several solutions in one run, interleaved per workload, with ratios")
    _eval_args(p)
    p.add_argument("solutions", nargs="+", help="solution .json, starter-kit folder, dataset root, or a built-in name")
    p.add_argument("--base", help="solution name the ratios are taken to (default: the first)")
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("report", help="merge the traces of one or more runs (machines) into one report")
    p.add_argument("runs", nargs="+", help="output folders of earlier runs (each holds traces/)")
    p.add_argument("--definition", action="append", required=True)
    p.add_argument("--dataset", default=None)
    p.add_argument("--out", required=True)
    p.add_argument("--allow-mixed-timers", action="store_true", help="merge runs timed differently (labelled)")
    p.add_argument("--base", action="append", default=[],
                   help="also write compare/<definition>.md with ratios to this solution (repeatable; used for the "
                        "definitions whose traces hold it)")
    p.set_defaults(func=cmd_report)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: traces written so far are kept; rerun with --resume to continue", file=sys.stderr)
        return 130
