"""gdn-harness: one command line for every job (`gdn-harness SUBCOMMAND`, or `python -m harness SUBCOMMAND`).

  eval      evaluate solutions on workloads (traces in the official layout, a table, exit 1 if any pair fails)
  compare   the same, then ratios to a base solution per workload and per batch size / T bucket
  full      what `make eval` runs: our submission, the FlashInfer baseline and our extras on every workload
  bench     the harness benchmark: `full` for ours + the baseline in a fresh folder, timed
  report    merge the traces of one or more output folders into one report
  fidelity  the harness against FlashInfer-Bench's own benchmark: run both (a GPU), or pair two finished runs
  agreement any two runs of the same pairs (e.g. Ray against local): verdicts, errors, latency ratios
  tune      our decode and prefill launch tables derived again on this GPU (a GPU), read by the kernel there
  package   submission/ (one starter-kit folder per definition) -> contest solution.json files
  public    other teams' published solutions: fetch, list, run them beside ours, report the leaderboard again

Every evaluating subcommand takes the same options with the same defaults (see `SUBCOMMAND --help`)."""
import argparse
import math
import os
import re
import signal
import sys
import threading
from pathlib import Path

from harness.eval.correctness import DEFAULT_ATOL, DEFAULT_MATCHED_RATIO, DEFAULT_RTOL
from harness.data.jsonio import DataError


def positive_int(text):
    """argparse type: an integer >= 1 (e.g. a number of processes)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _float_type(what, ok):
    """An argparse type: a finite number for which ok(value) holds; `what` says which, e.g. '> 0'."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and ok(value)):
            raise argparse.ArgumentTypeError(f"expected a number {what}, got {text!r}")
        return value
    return parse


positive_float = _float_type("> 0", lambda v: v > 0)
non_negative_float = _float_type(">= 0", lambda v: v >= 0)
fraction = _float_type("in (0, 1]", lambda v: 0 < v <= 1)


DEVICE_PATTERN, DEVICE_EXPECTED = r"cpu|cuda(:\d+)?", "expected cpu, cuda or cuda:N (e.g. cuda:0)"


def device_name(text):
    """argparse type: cpu, cuda or cuda:N (what --device accepts)."""
    if not re.fullmatch(DEVICE_PATTERN, text):
        raise argparse.ArgumentTypeError(f"{DEVICE_EXPECTED}, got {text!r}")
    return text


def _index_range(part, count):
    """The indices of a selector token of digits ('3') or a range of them ('0-2'); DataError when it is not one
    that fits `count` workloads, None when the token is not made of digits."""
    if not re.fullmatch(r"\d+(-\d*)?", part):
        return None
    lo, dash, hi = part.partition("-")
    if dash and not hi:
        raise DataError("--workloads", f"range {part!r} has no end",
                        f"write both ends, e.g. {lo}-{max(int(lo), count - 1)} for workload {lo} to the last")
    lo, hi = int(lo), int(hi or lo)
    if lo > hi:
        raise DataError("--workloads", f"range {part!r} is empty: it starts after it ends",
                        f"write it low-high, e.g. {hi}-{lo}")
    if hi >= count:
        raise DataError("--workloads", f"{'range' if dash else 'index'} {part!r} outside 0-{count - 1}")
    return range(lo, hi + 1)


def select_workloads(workloads, selector, elsewhere=()):
    """'all', indices '0,3', ranges '0-2', uuids or uuid prefixes (any case), comma-separated, in file order. A token
    of digits is an index (or a range) when it is a valid one, else a uuid prefix; an empty selector is refused. A
    uuid prefix that names none of `workloads` but one of `elsewhere` (another definition's, in the same run)
    selects nothing here."""
    if selector is None or selector.strip() == "all":
        return list(workloads)
    parts = [p.strip() for p in selector.split(",") if p.strip()]
    if not parts:
        raise DataError("--workloads", f"{selector!r} selects nothing",
                        "give indices, ranges or uuid prefixes, e.g. '0-2,5', or 'all'")
    picked = []
    for part in parts:
        hits = [i for i, w in enumerate(workloads) if w.uuid.startswith(part.lower())]
        try:
            indices = _index_range(part, len(workloads))
        except DataError:
            if not hits:   # digits that are no index here but begin a uuid: that uuid prefix
                raise
            indices = None
        if indices is not None:
            picked.extend(indices)
            continue
        if not hits and any(w.uuid.startswith(part.lower()) for w in elsewhere):
            continue
        if len(hits) != 1:
            some = ", ".join(f"{i}: {workloads[i].uuid[:8]}" for i in hits[:6]) + (", ..." if len(hits) > 6 else "")
            number = not hits and re.fullmatch(r"[-+]?\d*\.?\d+", part)
            raise DataError("--workloads", f"{part!r} matches {len(hits)} workload uuids"
                                           + (f" ({some})" if hits else "") + "; need exactly one",
                            f"indices are whole numbers from 0 to {len(workloads) - 1}" if number else None)
        picked.extend(hits)
    seen = set()
    return [workloads[i] for i in picked if not (i in seen or seen.add(i))]


def check_out(path, option="--out"):
    """Refuse an output folder that is a file, cannot be created, or cannot be written, before any work."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise DataError(path, f"{option} names a file, not a folder", "name a folder; a missing one is created")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise DataError(path, f"{option} is a folder this user cannot write to", "name another folder")
        return
    parent = next(p for p in path.absolute().parents if p.exists())
    if not parent.is_dir():
        raise DataError(path, f"{option} cannot be created: {parent} is a file, not a folder", "name another folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError(path, f"{option} cannot be created: this user cannot write to {parent}",
                        "name another folder")


EVERY_DEFINITION = "definition to evaluate (repeatable; default: every definition of the dataset)"


def _selection_options(p, definition_help=None, out_help="output folder (traces/, harness/, report/)"):
    p.add_argument("--definition", action="append", metavar="NAME",
                   help=definition_help or "definition to evaluate (repeatable; default: every definition the "
                                           "solutions are for)")
    p.add_argument("--workloads", default="all", metavar="SELECTOR",
                   help="indices, closed ranges and uuid prefixes per definition: '0-2', '0,5', 'abcd1234' (digits "
                        "that are no index here: a uuid prefix; an open range '3-' is refused) (default: all)")
    p.add_argument("--dataset", default=None, metavar="DIR", help="dataset root (default: the repo's workloads/)")
    p.add_argument("--out", default=None, metavar="DIR", help=out_help)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_run_options(p, definition_help=None, out_help="output folder (traces/, harness/, report/)", gpu_only=False):
    """The options of every evaluating subcommand: one name, one meaning, one default (gpu_only: a command that
    times on a GPU and refuses cpu)."""
    from harness.dist.cluster import LOCAL
    _selection_options(p, definition_help, out_help)
    p.add_argument("--device", type=device_name, default=None,
                   help="cuda or cuda:N (default: cuda; this command times on a GPU)" if gpu_only else
                   "cpu, cuda or cuda:N (default: cuda if one is visible)")
    p.add_argument("--isolation", choices=["worker", "process", "none"], default="worker",
                   help="worker (default): one persistent child per solution, restarted after a crash; process: "
                        "a fresh child per pair, as officially (slower); none: in this process (debugging)")
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="keep the pairs already traced in --out for the same solution content, hardware and "
                        "settings (default: on; traces of other ones move to <out>/stale/); --no-resume evaluates "
                        "them again and moves their earlier traces there too")
    p.add_argument("--timer", choices=["auto", "cupti", "events"], default="auto",
                   help="CUDA timer: auto/cupti is the official CUPTI span; 'events' is not official and is "
                        "labelled so (no effect on the CPU)")
    p.add_argument("--warmup", type=non_negative_int, help="warmup calls (default: official; 0 on the CPU)")
    p.add_argument("--iterations", type=positive_int, help="timed calls per trial (default: official; 1 on the CPU)")
    p.add_argument("--trials", type=positive_int, help="trials (default: official 3; 1 on the CPU)")
    p.add_argument("--timeout", type=positive_float, default=300.0,
                   help="seconds per pair (default 300); --isolation process: from the child's start (imports, CUDA "
                        "context and build included) and the child must be ready within 30 s, as officially; "
                        "worker: from the job's send")
    p.add_argument("--atol", type=non_negative_float, default=DEFAULT_ATOL,
                   help=f"absolute tolerance, >= 0 (default {DEFAULT_ATOL})")
    p.add_argument("--rtol", type=non_negative_float, default=DEFAULT_RTOL,
                   help=f"relative tolerance, >= 0 (default {DEFAULT_RTOL})")
    p.add_argument("--required-matched-ratio", type=fraction, default=DEFAULT_MATCHED_RATIO,
                   help=f"fraction of elements within tolerance, in (0, 1] (default {DEFAULT_MATCHED_RATIO})")
    p.add_argument("--reference-timing", choices=["quick", "official"], default="quick",
                   help="quick (default): the prefill reference (a slow Python loop) is timed with 1 trial of 1 "
                        "iteration; official: as the solutions")
    p.add_argument("--no-profile-baseline", action="store_true",
                   help="do not time the reference (no speedups; never timed on the CPU, where no speedup is shown)")
    p.add_argument("--reference-budget", type=non_negative_float, default=None, metavar="SECONDS",
                   help="stop timing uncached references after this many seconds (the rest: not profiled)")
    p.add_argument("--reference-output-cache", action=argparse.BooleanOptionalAction, default=True,
                   help="keep inputs and reference outputs in .cache/payloads/ for later runs (default: on; keyed "
                        "by definition, workload, input bytes, seed, GPU model and torch version)")
    p.add_argument("--prepare-jobs", type=positive_int, default=None, metavar="N",
                   help="processes making inputs and reference outputs before timing starts (default on CUDA: half "
                        "the cores, at most 8; 1 on the CPU: one workload at a time inside the loop)")
    p.add_argument("--prestart", type=non_negative_int, default=None, metavar="N",
                   help="--isolation process: spare children started ahead for speed; they start beside the timed "
                        "calls (a printed deliberate difference). Default 0: one child per pair, started when its "
                        "pair begins, as officially. Other isolations: no effect (a warning)")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (recorded; default 0)")
    p.add_argument("--strict", action="store_true",
                   help="fail (INCORRECT_NUMERICAL) a solution that is wrong on fresh inputs after timing")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 even when pairs are not PASSED (default: exit 1; for scripts)")
    p.add_argument("--state-copy", action="store_true",
                   help="also time a device copy of each workload's state into new_state, as the solutions are timed: "
                        "the bytes a kernel that writes a new state moves at least; reports give each solution's "
                        "latency over it per batch size / T bucket")
    p.add_argument("--ray", nargs="?", const=LOCAL, default=None, metavar="ADDRESS",
                   help="run the pairs on Ray actors, one per GPU (pip install '.[ray]'): alone, a new local instance "
                        "(every GPU of this host); 'auto', the cluster `ray start` made on this host; host:port, a "
                        "cluster's head")
    p.add_argument("--ray-actors", type=positive_int, default=None, metavar="N",
                   help="--ray: N actors (default: one per GPU of the cluster; 1 with --device cpu)")


def _solution_option(p, required=True):
    p.add_argument("--solution", action="append", required=required, metavar="SOL",
                   help="a solution .json, a starter-kit folder, a dataset root, or a built-in name: reference, "
                        "ours (submission/), baseline (FlashInfer), fla, ablation (our prefill ablation) (repeatable)")


def build_parser():
    parser = argparse.ArgumentParser(prog="gdn-harness", description=__doc__, usage="%(prog)s [-h] SUBCOMMAND ...",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND", prog="gdn-harness",
                                help=argparse.SUPPRESS)   # the description lists them
    p = sub.add_parser("eval", description="evaluate solutions on workloads")
    _solution_option(p)
    add_run_options(p, out_help="output folder (traces/, harness/; default: results/local)")
    p.set_defaults(func=cmd_eval, default_out="results/local", writes_out=True)
    p = sub.add_parser("compare", description="several solutions in one run, with ratios to a base")
    _solution_option(p)
    add_run_options(p, out_help="output folder (traces/, harness/, compare/; default: results/compare)")
    p.add_argument("--base", action="append", default=[], metavar="SOLUTION",
                   help="the solution the ratios are taken to: a solution's name, or as --solution names it "
                        "(baseline, a kit); repeatable, one per definition (default: the first --solution)")
    p.set_defaults(func=cmd_compare, default_out="results/compare", writes_out=True)
    p = sub.add_parser("full", description="what `make eval` runs: ours + the FlashInfer baseline (+ extras), "
                                           "every workload")
    add_run_options(p, EVERY_DEFINITION, "output folder (traces/, harness/, report/, compare/; default: "
                                         "results/<gpu>/)", gpu_only=True)
    p.add_argument("--peers", action="store_true", help="also the other authors' solutions in the dataset (FLA)")
    p.add_argument("--no-extras", action="store_true", help="only ours and the baseline (not the prefill ablation)")
    p.add_argument("--no-report", action="store_true", help="write no report/ and compare/")
    p.set_defaults(func=cmd_full, default_out=None, writes_out=True)
    p = sub.add_parser("bench", description="the harness benchmark: ours + baseline in a fresh folder, wall time")
    _selection_options(p, EVERY_DEFINITION, "a fresh (missing or empty) folder (default: .cache/bench/<gpu>/, "
                                            "emptied first)")
    p.add_argument("--timer", choices=["auto", "cupti", "events"], default="auto", help="as for eval")
    p.add_argument("--prepare-jobs", type=positive_int, default=None, metavar="N", help="as for eval")
    p.set_defaults(func=cmd_bench, default_out=None, writes_out=True)
    p = sub.add_parser("report", description="merge the traces of one or more output folders into one report")
    p.add_argument("runs", nargs="+", metavar="DIR", help="output folders of earlier runs (each holds traces/)")
    p.add_argument("--definition", action="append", metavar="NAME",
                   help="definition to report (repeatable; default: every definition with traces)")
    p.add_argument("--dataset", default=None, metavar="DIR",
                   help="dataset root the runs used (default: the repo's workloads/)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder the merged report/ (and compare/) go to")
    p.add_argument("--allow-mixed-timers", action="store_true", help="merge runs timed differently (labelled)")
    p.add_argument("--base", action="append", default=[], metavar="NAME",
                   help="also write compare/<definition>.md with ratios to this solution (repeatable; it must "
                        "have traces in the runs)")
    p.set_defaults(func=cmd_report, writes_out=True)
    p = sub.add_parser("fidelity", description="the harness against FlashInfer-Bench's own benchmark on the same "
                                               "solutions: run both (--solution, a GPU) or pair two finished runs "
                                               "(--harness, --fib)")
    _solution_option(p, required=False)
    add_run_options(p)
    p.add_argument("--fib-src", default=None, metavar="DIR",
                   help="with --solution: a folder holding flashinfer_bench/ (default: the installed package)")
    p.add_argument("--runner", choices=["isolated", "persistent"], default="isolated",
                   help="with --solution: FlashInfer-Bench's runner (isolated: the contest's); the harness runs in "
                        "the matching isolation (process / worker)")
    p.add_argument("--profile-reference", action="store_true",
                   help="with --solution: time the reference on both sides at the official settings (minutes per "
                        "decode workload under CUPTI)")
    p.add_argument("--harness-again", action="store_true",
                   help="with --solution: the harness a second time per chunk, between the two FlashInfer-Bench runs, "
                        "into <out>/harness-again; fidelity_harness_noise.md then sets FlashInfer-Bench against "
                        "the harness's own spread")
    p.add_argument("--harness", default=None, metavar="DIR", help="the harness's output folder (holds traces/)")
    p.add_argument("--fib", default=None, metavar="DIR", help="FlashInfer-Bench's dataset root after its run")
    p.add_argument("--fib-again", default=None, metavar="DIR",
                   help="a second FlashInfer-Bench run of the same pairs: its ratios to the first are the noise floor")
    p.set_defaults(func=cmd_fidelity, writes_out=True)
    p = sub.add_parser("agreement", description="two runs of the same pairs (e.g. Ray against local): verdicts, "
                                                "max errors, latency ratios, and the second run's spread as the "
                                                "noise floor")
    p.add_argument("--run", required=True, metavar="DIR", help="the first run's output folder (holds traces/)")
    p.add_argument("--against", required=True, metavar="DIR",
                   help="the second run's output folder: ratios are --run / --against")
    p.add_argument("--again", default=None, metavar="DIR",
                   help="the second run made again: its ratios to --against are the noise floor")
    p.add_argument("--definition", action="append", metavar="NAME", help="default: every definition")
    p.add_argument("--dataset", default=None, metavar="DIR", help="dataset root (default: the repo's workloads/)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder agreement.md and its CSV tables go to")
    p.add_argument("--names", nargs=2, default=None, metavar=("A", "B"),
                   help="labels of --run and --against in the report (default: their folder names)")
    p.set_defaults(func=cmd_agreement, writes_out=True)
    p = sub.add_parser("tune", description="our launch tables derived again on this GPU with the official timer, "
                                           "written to the submission's tuned_tables.json (a GPU)")
    p.add_argument("--definition", action="append", metavar="NAME",
                   help="decode or prefill definition name (repeatable; default: both)")
    p.add_argument("--submission", default=None, metavar="DIR",
                   help="folder of starter-kit folders, one per definition (default: the repo's submission/)")
    p.add_argument("--dataset", default=None, metavar="DIR", help="dataset root (default: the repo's workloads/)")
    p.add_argument("--device", type=device_name, default=None,
                   help="cuda (default), cuda:N, or cpu (interpreter; for tests, not official)")
    p.set_defaults(func=cmd_tune, timer="cupti")   # the official timer only; device_of checks it is there
    p = sub.add_parser("package", description="submission/ -> <out>/<definition>/solution.json")
    p.add_argument("--submission", default=None, metavar="DIR",
                   help="a starter-kit folder, or a folder of them, one per definition (default: the repo's "
                        "submission/)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default: results/package, in the current folder as every --out)")
    p.add_argument("--dataset", default=None, metavar="DIR", help="dataset root (default: the repo's workloads/)")
    p.set_defaults(func=cmd_package, writes_out=True)
    from harness.public.commands import add_public_parser
    add_public_parser(sub)
    return parser


def dataset_of(args):
    from harness.data.dataset import Dataset
    return Dataset(args.dataset) if args.dataset else Dataset()


def device_of(args):
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if not re.fullmatch(DEVICE_PATTERN, device):   # --device is checked by argparse; this, for other callers
        raise DataError("--device", f"{DEVICE_EXPECTED}, got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DataError("--device", "CUDA is not available on this machine", "use --device cpu")
    if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise DataError("--device", f"{device}: this machine has {torch.cuda.device_count()} visible GPU(s)",
                        f"name cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if device.startswith("cuda"):
        from harness.eval.timing_cuda import resolve_timer
        try:
            resolve_timer(args.timer)
        except Exception as exc:
            raise DataError("--timer", str(exc)) from None
    return device


def workloads_per_definition(dataset, definitions, selector):
    """{definition name: the workloads `selector` picks of it}: indices and ranges pick from each definition, a
    uuid prefix from the one whose workload it names; a definition it leaves none of is left out, and said. So is
    one whose selection is refused (an index past its last workload) where another definition's is not."""
    every = {d.name: dataset.workloads(d) for d in definitions}
    picked, refused = {}, {}
    for name, workloads in every.items():
        others = [w for other, ws in every.items() if other != name for w in ws]
        try:
            chosen = select_workloads(workloads, selector, elsewhere=others)
        except DataError as exc:
            refused[name] = exc
            continue
        if chosen:
            picked[name] = chosen
        else:
            print(f"{name}: not run: --workloads {selector} names only other definitions' workloads")
    if refused and len(refused) == len(every):
        first = next(iter(refused.values()))
        raise DataError("--workloads", "; ".join(f"{e.message} on {n}" for n, e in refused.items()), first.hint)
    for name, exc in refused.items():
        print(f"{name}: not run: --workloads {selector}: {exc.message} there")
    return picked


def _plans(dataset, args):
    """[(definition, workloads, solutions)] for eval/compare: the named definitions, else every definition
    the named solutions are for (a built-in name stands for every definition)."""
    from harness.data.resolve import resolve, definitions_of

    names = args.definition or definitions_of(args.solution, dataset)
    selected = workloads_per_definition(dataset, [dataset.definition(n) for n in names], args.workloads)
    plans = []
    for name in names:
        definition = dataset.definition(name)
        if name not in selected:
            continue
        strict = bool(args.definition)
        solutions = [s for arg in args.solution for s in resolve(arg, definition, dataset, strict=strict)]
        if not solutions:
            continue
        for note in dict.fromkeys(n for s in solutions for n in s.notes):
            print(f"warning: {note}", file=sys.stderr)
        taken = [s.name for s in solutions]
        if len(set(taken)) != len(taken):
            raise DataError("--solution", f"two solutions share a name on {name}: {taken}",
                            "rename one ([solution] name in its config.toml, or 'name' in its JSON)")
        plans.append((definition, selected[name], solutions))
    return plans


def ray_options(args):
    """RayOptions from --ray/--ray-actors (None without --ray); Ray must be installed (else exit 2, saying how)."""
    if args.ray is None:
        if args.ray_actors is not None:
            raise DataError("--ray-actors", "needs --ray")
        return None
    from harness.dist.cluster import RayOptions, require_ray
    require_ray()
    return RayOptions(args.ray, args.ray_actors)


def run_options(args, device, definition, out):
    """EvalOptions for one definition from the shared options."""
    from harness.build.builders import CACHE_ROOT
    from harness.eval.options import EvalOptions, default_prepare_jobs
    from harness.eval.correctness import Tolerance
    from harness.eval.child import TimingConfig, official_timing
    from harness.eval.reference_latency import reference_quick
    from harness.eval.state_copy import require_state

    cpu = not device.startswith("cuda")
    official = official_timing(definition.name)
    pick = lambda given, gpu_default, cpu_default: given if given is not None else (  # noqa: E731
        cpu_default if cpu else gpu_default)
    timing = TimingConfig(pick(args.warmup, official.warmup, 0), pick(args.iterations, official.iters, 1),
                          pick(args.trials, official.trials, 1))
    quick = args.reference_timing == "quick" and not cpu
    if args.state_copy:
        require_state(definition)
    return EvalOptions(
        device=device, out_dir=Path(out), timeout=args.timeout,
        tolerance=Tolerance(args.atol, args.rtol, args.required_matched_ratio), timing=timing, official=official,
        reference_timing=reference_quick(definition.name) if quick else None,
        profile_baseline=not (args.no_profile_baseline or cpu), resume=args.resume, seed=args.seed,
        isolation=args.isolation, timer=args.timer, show_progress=not args.quiet, strict=args.strict,
        prestart=args.prestart, reference_cache=Path(out) / "reference_latency.json",
        reference_budget_s=args.reference_budget,
        payload_cache=CACHE_ROOT / "payloads" if args.reference_output_cache else None,
        prepare_jobs=args.prepare_jobs or (1 if cpu else default_prepare_jobs()), ray=ray_options(args),
        state_copy=args.state_copy)


def _planned(args):
    """(dataset, plans) of eval/compare, refused when no solution is for the chosen definitions."""
    dataset = dataset_of(args)
    plans = _plans(dataset, args)
    if not plans:
        raise DataError("--solution", "no solution for the chosen definitions")
    return dataset, plans


def warn_ignored(args, device=None):
    """A one-line warning for each option given that has no effect here: --prestart without --isolation process,
    --timer cupti/events on the CPU (`device`: the device the run uses, None when not known yet)."""
    isolation = getattr(args, "isolation", "process")
    if getattr(args, "prestart", None) is not None and isolation != "process":
        print(f"warning: --prestart has no effect with --isolation {isolation} (only with --isolation process)",
              file=sys.stderr)
    if device is not None and not device.startswith("cuda") and getattr(args, "timer", "auto") != "auto":
        print(f"warning: --timer {args.timer} has no effect on the CPU (wall-clock timing there)", file=sys.stderr)


def _evaluate(args, dataset, plans):
    """Run the plans; (output folder, results)."""
    from harness.eval.options import print_differences
    from harness.eval.console import run_definition

    device = device_of(args)
    warn_ignored(args, device)
    out = Path(args.out or args.default_out)
    runs = [run_options(args, device, definition, out) for definition, _, _ in plans]
    print_differences(*runs)
    results = []
    for (definition, workloads, solutions), opts in zip(plans, runs):
        results += run_definition(dataset, definition, workloads, solutions, opts)
    return out, results


def exit_status(results, args):
    """1 when a pair evaluated in this run is not PASSED (unless --exit-zero), else 0."""
    from harness.eval.loop import not_passed
    return 0 if args.exit_zero or not not_passed(results) else 1


def cmd_eval(args):
    _, results = _evaluate(args, *_planned(args))
    return exit_status(results, args)


def _compare_bases(dataset, plans, bases):
    """{definition name: the base of its comparison}: the first of `bases` that names one of its solutions (by name,
    or as --solution names it), else its first solution, said. A comparison of fewer than two solutions, or a --base
    that names a solution of no definition, is refused."""
    from harness.data.resolve import resolve

    def names(arg, definition):
        try:
            return {s.name for s in resolve(arg, definition, dataset, strict=False)}
        except DataError:   # not a name --solution takes
            return set()

    chosen, used = {}, set()
    for definition, _, solutions in plans:
        if len(solutions) < 2:
            raise DataError("compare", f"{definition.name}: name at least two solutions (one: use eval)")
        taken = [s.name for s in solutions]
        for arg in bases:
            named = {arg} | names(arg, definition)
            hit = [n for n in taken if n in named]
            if hit:
                chosen[definition.name] = hit[0]
                used.add(arg)
                break
        else:
            chosen[definition.name] = taken[0]
            if bases:
                print(f"{definition.name}: no --base names one of its solutions {taken}: ratios to {taken[0]}")
    unknown = [b for b in bases if b not in used]
    if unknown:
        every = {d.name: [s.name for s in sols] for d, _, sols in plans}
        raise DataError("--base", f"{', '.join(map(repr, unknown))} names none of the solutions compared: {every}")
    return chosen


def cmd_compare(args):
    from harness.report.compare import write_comparison

    dataset, plans = _planned(args)
    bases = _compare_bases(dataset, plans, args.base)   # refused before any pair runs
    out, results = _evaluate(args, dataset, plans)
    on_cpu = not device_of(args).startswith("cuda")
    for definition, workloads, solutions in plans:
        # this command's pairs only: the folder may hold other solutions and workloads from earlier runs
        pairs = ({s.name for s in solutions}, {w.uuid for w in workloads})
        cmp_dir, summary, buckets = write_comparison(out, definition, bases[definition.name], pairs=pairs)
        if on_cpu:
            print("CPU wall clock (Triton through its interpreter, 0 warmup by default): these latencies and ratios "
                  "say nothing about the solutions' speed on a GPU")
        print(summary.to_string(index=False, na_rep="-"))
        print(buckets.to_string(index=False, na_rep="-"))
        if args.state_copy:
            _print_state_copy(out, definition, pairs, list(summary.solution))
        print(f"comparison report: {cmp_dir}/{definition.name}.md")
    return exit_status(results, args)


def _print_state_copy(out, definition, pairs, order):
    """The --state-copy means per bucket and each solution's latency over them, as the report gives them."""
    from harness.report.compare import selected
    from harness.report.rows import load_rows
    from harness.report.state_copy import copy_ratios, load_copies

    rows = selected(load_rows([out], [definition]), pairs)
    means, ratios = copy_ratios(rows, load_copies([out], definition), order)
    print(f"state copy (us) and each solution's latency over it:\n{means.to_string(index=False, na_rep='-')}\n"
          f"{ratios.to_string(index=False, na_rep='-')}")


def cmd_full(args):
    from harness.full import run_full
    warn_ignored(args)
    return run_full(args, argv=args.argv)


def cmd_bench(args):
    from harness.full import run_bench
    return run_bench(args)


def cmd_report(args):
    from harness.report.rows import load_rows
    from harness.report.summary import write_report

    dataset = dataset_of(args)
    for run in args.runs:
        if not (Path(run) / "traces").is_dir():
            raise DataError(run, "no such folder" if not Path(run).exists() else
                            "no traces/ folder: not an output folder of the harness")
    definitions = [dataset.definition(n) for n in (args.definition or sorted(dataset.definitions))]
    df = load_rows(args.runs, definitions)
    if df.empty:
        found = sorted({p.stem for run in args.runs for p in (Path(run) / "traces").glob("*/*/*.jsonl")})
        raise DataError(", ".join(args.runs), f"holds no traces of {', '.join(d.name for d in definitions)}",
                        f"its trace files are for {', '.join(found)}: --definition, or a --dataset that has them"
                        if found else "name a folder a run wrote traces into")
    definitions = [d for d in definitions if d.name in set(df.definition)]
    unknown = [b for b in dict.fromkeys(args.base) if b not in set(df.solution)]
    if unknown and len(unknown) == len(set(args.base)):   # no comparison would be written
        raise DataError("--base", f"{', '.join(map(repr, unknown))}: no solution of that name in these runs",
                        f"name one of {sorted(set(df.solution))}")
    for base in unknown:   # beside a --base that is there: skipped, with a warning
        print(f"warning: --base {base!r}: no solution of that name in these runs, no comparison to it (there: "
              f"{', '.join(sorted(set(df.solution)))})", file=sys.stderr)
    timers = sorted(set(df.timer[df.latency_us.notna()]))  # failed pairs were not timed
    if len(timers) > 1 and not args.allow_mixed_timers:
        raise DataError("report", f"these runs used different timers {timers}; their figures are not comparable",
                        "pass --allow-mixed-timers to merge them anyway (each row keeps its timer)")
    out, summary, track, _ = write_report(args.out, definitions, sources=args.runs, dataset=dataset)
    # the console gets the headline columns; report.md and summary.csv have every one
    print(summary[["definition", "solution", "passed", "workloads", "mean_latency_us", "mean_speedup_vs_baseline",
                   "official_score_vs_baseline"]].to_string(index=False, na_rep="-"))
    if args.base:
        from harness.report.compare import write_comparison
        for definition in definitions:
            present = set(df.solution[df.definition == definition.name])
            for base in [b for b in args.base if b in present]:
                cmp_dir, _, buckets = write_comparison(args.out, definition, base, sources=args.runs)
                print(buckets.to_string(index=False, na_rep="-"))
                print(f"comparison: {cmp_dir}/{definition.name}.md")
    print(f"report: {out}/report.md")
    return 0


def _write_agreement(args, runs, names, stem, title=None):
    """cmd_fidelity and cmd_agreement: check the folders, write <out>/<stem>.md and print the agreement table."""
    from harness.report.fidelity import write_agreement

    dataset = dataset_of(args)
    for run in filter(None, (runs.a, runs.b, runs.b_again)):
        if not (Path(run) / "traces").is_dir():
            raise DataError(run, "no such folder" if not Path(run).exists() else
                            "no traces/ folder: not a run's output folder or dataset root")
    definitions = [dataset.definition(n) for n in (args.definition or sorted(dataset.definitions))]
    try:
        table, lone = write_agreement(args.out, definitions, runs, names, stem, title)
    except ValueError as exc:
        raise DataError(stem, str(exc)) from None
    print(table.to_string(index=False, na_rep="-"))
    report = Path(args.out) / f"{stem}.md"
    if lone:
        print(f"{lone} pair(s) traced in one run only: not in the figures; listed in {report}")
    print(f"{stem} report: {report}")
    return 0


def cmd_fidelity(args):
    from harness.report.fidelity import FIDELITY_NAMES, FIDELITY_TITLE, Runs
    if not args.solution and not (args.harness and args.fib):
        raise DataError("fidelity", "name solutions to run (--solution) or two finished runs (--harness and --fib)")
    if not args.out:
        raise DataError("--out", "the report's folder is required")
    if args.solution:
        if args.harness or args.fib or args.fib_again:
            raise DataError("fidelity", "--solution runs both tools; --harness/--fib pair finished runs: not both")
        harness, fib, fib_again, *again = map(str, _run_fidelity(args))
        runs = Runs(harness, fib, fib_again)
    elif args.harness and args.fib:
        if args.harness_again:
            raise DataError("--harness-again", "runs the harness again with --solution; to pair finished runs use "
                            "gdn-harness agreement --run FIB --against HARNESS --again HARNESS-AGAIN")
        runs, again = Runs(args.harness, args.fib, args.fib_again), []
        _warn_unused_in_pairing(args)
    _write_agreement(args, runs, FIDELITY_NAMES, "fidelity", FIDELITY_TITLE)
    if again:
        _write_agreement(args, Runs(runs.b, runs.a, again[0]), FIDELITY_NAMES[::-1], "fidelity_harness_noise",
                         "FlashInfer-Bench against the harness, with the harness's own spread")
    return 0


# what pairing finished runs reads; every other fidelity option is for running the two tools
PAIRING_OPTIONS = {"command", "func", "argv", "harness", "fib", "fib_again", "harness_again", "out", "definition",
                   "dataset", "default_out", "writes_out"}


def _warn_unused_in_pairing(args):
    """Say which options given with --harness/--fib have no effect there (they apply to running both tools)."""
    defaults = vars(build_parser().parse_args(["fidelity"]))
    unused = sorted(k for k, v in vars(args).items() if k not in PAIRING_OPTIONS and v != defaults.get(k))
    if unused:
        print("warning: pairing finished runs (--harness, --fib) reads only --definition and --dataset; ignored: "
              + ", ".join("--" + k.replace("_", "-") for k in unused), file=sys.stderr)


def _run_fidelity(args):
    """Both tools on the chosen solutions and workloads (harness/fib.py); the folders of the runs."""
    from harness.eval.options import print_differences
    from harness.fib import ISOLATION_OF_RUNNER, Fib, FibPlan, as_runner, run_fidelity

    device = device_of(args)
    if not device.startswith("cuda"):
        raise DataError("--device", "FlashInfer-Bench's runners need a GPU")
    if args.isolation not in ("worker", ISOLATION_OF_RUNNER[args.runner]):   # "worker": the default, not chosen
        print(f"warning: --isolation {args.isolation} has no effect with fidelity: the harness runs as FlashInfer-"
              f"Bench's {args.runner} runner does ({ISOLATION_OF_RUNNER[args.runner]}; --runner)", file=sys.stderr)
    if args.prestart is not None and args.runner != "isolated":
        print(f"warning: --prestart has no effect with --runner {args.runner} (only with --runner isolated)",
              file=sys.stderr)
    import torch
    if torch.cuda.device_count() > 1:
        raise DataError("fidelity", f"{torch.cuda.device_count()} GPUs are visible: FlashInfer-Bench would time the "
                        "reference on each and spread every workload's solutions over them, while the harness uses "
                        "one", "make one visible, e.g. CUDA_VISIBLE_DEVICES=0")
    fib = Fib(args.fib_src, FibPlan(args.runner, args.profile_reference))
    dataset = dataset_of(args)
    plans = _plans(dataset, args)
    if args.profile_reference:
        args.reference_timing = "official"
    else:
        args.no_profile_baseline = True

    def opts_of(definition, folder):   # printed as run: in the isolation of FlashInfer-Bench's runner
        return as_runner(run_options(args, device, definition, folder), args.runner)

    print_differences(*[opts_of(d, Path(args.out) / "harness") for d, _, _ in plans])
    return run_fidelity(dataset, plans, opts_of, args.out, fib, args.harness_again)


def cmd_agreement(args):
    from harness.report.fidelity import Runs
    if Path(args.run).resolve() == Path(args.against).resolve():
        raise DataError("--against", f"names the same folder as --run ({args.run}): every ratio would be 1",
                        "name the second run's folder")
    names = args.names or (Path(args.run).resolve().name, Path(args.against).resolve().name)
    return _write_agreement(args, Runs(args.run, args.against, args.again), names, "agreement")


def cmd_tune(args):
    from harness.build.package import REPO
    from harness.eval.child import TimingConfig, official_timing
    from harness.tune import DECODE, PREFILL, device_name_of, tune_decode, tune_prefill
    from harness.eval.pool import use_triton_interpreter

    device = device_of(args)
    if args.device is None and not device.startswith("cuda"):
        raise DataError("--device", "tune times our kernels on a GPU, with the official timer; there is none here",
                        "run it on a CUDA GPU; --device cpu runs Triton's interpreter, for tests only")
    use_triton_interpreter(device)   # --device cpu: before our kernels' modules apply @triton.jit
    names = args.definition or [DECODE, PREFILL]
    unknown = sorted(set(names) - {DECODE, PREFILL})
    if unknown:
        raise DataError("--definition", f"no launch table to tune for {', '.join(unknown)}",
                        f"name {DECODE} or {PREFILL}")
    if not device.startswith("cuda") and args.submission is None:
        raise DataError("--device", "tune --device cpu times Triton's interpreter (hours; for tests) and writes a "
                        "'cpu' table into the submission it tunes, which `make package` would pack",
                        "tune on a CUDA GPU; to try it on the CPU, give --submission with a copy of submission/")
    folders = {n: Path(args.submission or REPO / "submission") / n / "solution" / "triton" for n in names}
    for n, folder in folders.items():
        if not (folder / "launch_table.py").is_file():
            raise DataError(folder, f"no launch_table.py: not our {n} submission's source folder")
    name = device_name_of(device)
    dataset = dataset_of(args)
    for n, folder in folders.items():
        timing = official_timing(n) if device.startswith("cuda") else TimingConfig(0, 1, 1)
        print(f"tuning {n} on {name} ({timing.warmup}/{timing.iters}/{timing.trials}"
              + (", the official timer)" if device.startswith("cuda") else ", CPU wall clock: not official)"))
        if n == DECODE:
            rows, path = tune_decode(folder, dataset, timing, device, name)
            rows = [(f"B={b}", shipped_ms, best, best_ms, copy_ms)
                    for b, _, shipped_ms, best, best_ms, copy_ms in rows]
        else:
            rows, path = tune_prefill(folder, dataset, timing, device, name)
            rows = [(f"T<={row.max_t} N<={row.max_n} ({k} workloads)", shipped_ms, best, best_ms, None)
                    for row, shipped_ms, best, best_ms, k in rows]
        print(_tune_table(rows))
        print(f"tuned table for {name}: {path} (the kernel reads it on this GPU; `make package` packs it)")
    return 0


def _tune_table(rows):
    """The tune command's table: per row the shipped and tuned latency, and (decode) the state copy's with the tuned
    row's ratio to it."""
    lines = [f"{'row':<34} {'shipped us':>11} {'tuned us':>9} {'tuned/shipped':>13} {'copy us':>8} "
             f"{'tuned/copy':>10}  tuned config"]
    for label, shipped_ms, best, best_ms, copy_ms in rows:
        ratio = f"{best_ms / shipped_ms:.3f}" if shipped_ms else "-"
        shipped = f"{shipped_ms * 1e3:.3f}" if shipped_ms else "wrong here"
        copy, to_copy = (f"{copy_ms * 1e3:.3f}", f"{best_ms / copy_ms:.3f}") if copy_ms else ("-", "-")
        lines.append(f"{label:<34} {shipped:>11} {best_ms * 1e3:>9.3f} {ratio:>13} {copy:>8} {to_copy:>10}  {best}")
    return "\n".join(lines)


def cmd_package(args):
    from harness.build.package import REPO, package

    out = Path(args.out or "results/package")
    earlier = {p: p.read_bytes() for p in out.glob("*/solution.json")}
    written = package(args.submission or REPO / "submission", out, dataset_of(args))
    for path, sol, differences in written:
        was = earlier.get(path)
        replaced = "" if was is None else " (unchanged)" if was == path.read_bytes() else " (replaced the earlier one)"
        print(f"{path}{replaced}: {sol.name} ({sol.definition}), {len(sol.sources)} source file(s), "
              f"entry {sol.spec.entry_point}")
        for note in sol.notes:
            print(f"  warning: {note}")
        for note in differences:
            print(f"  note: {note}")
    return 0


class Terminated(KeyboardInterrupt):
    """SIGTERM (e.g. `timeout`, a batch system), handled as Ctrl-C: a BaseException, so no per-pair handler records
    it as the pair's failure."""


def _raise_terminated(signum, frame):
    raise Terminated()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv[1:]   # after the subcommand: what runs.jsonl records
    if getattr(args, "definition", None):
        args.definition = list(dict.fromkeys(args.definition))   # a definition named twice runs once
    on_main = threading.current_thread() is threading.main_thread()
    earlier = signal.signal(signal.SIGTERM, _raise_terminated) if on_main else None
    try:
        out = getattr(args, "out", None) or getattr(args, "default_out", None)
        if getattr(args, "writes_out", False) and out:
            check_out(out)
        return args.func(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:   # e.g. a folder that became unwritable mid-run: one line, not a traceback
        print(f"error: {f'{exc.filename}: {exc.strerror}' if exc.filename and exc.strerror else exc}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("interrupted: traces written so far are kept; run the same command again to resume", file=sys.stderr)
        if out and (Path(out) / "traces").is_dir():   # the table of the pairs finished, without running any
            print(f"  the pairs finished so far: gdn-harness report {out} --out {out}", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, earlier)
