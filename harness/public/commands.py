"""The `gdn-harness public` subcommands: fetch, list, run and report."""
import json
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

from harness.data.jsonio import DataError
from harness.public.board import write_board
from harness.public.entries import load_entries
from harness.public.fetch import DEFAULT_CACHE, fetch, fetch_state, not_entries
from harness.public.runs_here import device_capability_here, public_solutions, runnable

ENTRY_BUDGET_S = 120.0  # public run --entry-budget: a fast entry spends ~0.3 s a pair in the timer


def add_public_parser(subparsers):
    p = subparsers.add_parser("public", description="other teams' published GDN solutions: fetch them, list them, "
                                                    "run them beside ours and report the leaderboard")
    actions = p.add_subparsers(dest="public_action", required=True, metavar="ACTION")
    f = actions.add_parser("fetch", help="get each entry's Solution JSON into the cache")
    f.add_argument("--from", dest="source", default=None, metavar="DIR",
                   help="a folder of pre-packed JSONs, <definition>/<name>.json (default: clone each repository)")
    f.add_argument("--cache", default=str(DEFAULT_CACHE), metavar="DIR", help="default: .cache/public in the repo")
    f.set_defaults(func=cmd_fetch)
    ls = actions.add_parser("list", help="what is known, fetched and runnable here")
    ls.add_argument("--cache", default=str(DEFAULT_CACHE), metavar="DIR", help="default: .cache/public in the repo")
    ls.set_defaults(func=cmd_list)
    from harness.cli import EVERY_DEFINITION, add_run_options, non_negative_int
    r = actions.add_parser("run", help="ours, the FlashInfer baseline, FLA and every fetched entry that can run here, "
                                       "in one run per definition, then the leaderboard (a GPU)")
    add_run_options(r, EVERY_DEFINITION, "output folder (traces/, leaderboard/; default: results/<gpu>/public)",
                    gpu_only=True)
    r.add_argument("--cache", default=str(DEFAULT_CACHE), metavar="DIR", help="default: .cache/public in the repo")
    r.add_argument("--solution", action="append", default=[], metavar="SOL",
                   help="also run this solution (a .json, a starter-kit folder, a dataset root; repeatable), e.g. "
                        "your own candidate or an earlier version of ours")
    r.add_argument("--give-up-after", type=non_negative_int, default=2, metavar="N",
                   help="after N timeouts of an entry, its pairs on workloads with no smaller inputs are not run "
                        "(listed with the reason, no trace; workloads run smallest first). Default 2; 0: never")
    r.add_argument("--entry-budget", type=float, default=ENTRY_BUDGET_S, metavar="SECONDS",
                   help="once an entry's pairs have spent SECONDS in the official timer (a timeout counts its wall "
                        "time), its remaining pairs are not run (listed with the reason, no trace). Default "
                        f"{ENTRY_BUDGET_S:g} per definition, about 4x what a fast entry spends on 100 workloads; 0: "
                        "no limit")
    r.set_defaults(func=cmd_run, default_out=None, writes_out=True)
    rep = actions.add_parser("report", help="the leaderboard again from a public run's folder (no GPU needed)")
    rep.add_argument("--out", required=True, metavar="DIR", help="the folder the public run wrote")
    rep.add_argument("--definition", action="append", metavar="NAME", help="default: every one with traces there")
    rep.add_argument("--dataset", default=None, metavar="DIR", help="dataset root (default: the repo's workloads/)")
    rep.add_argument("--cache", default=str(DEFAULT_CACHE), metavar="DIR", help="default: .cache/public in the repo")
    rep.set_defaults(func=cmd_report, writes_out=True)


def cmd_fetch(args):
    """One line per entry (a reason repeated from the line above is not printed again; what became of the copy
    fetched earlier of an entry not fetched now), then the counts; exit 1 unless every entry was fetched now (a copy
    kept from an earlier fetch is not one)."""
    from harness.cli import check_out
    if args.source and Path(args.source).exists() and not Path(args.source).is_dir():
        raise DataError(args.source, "--from names a file, not a folder", "give a folder laid out "
                        "<definition>/<name>.json")
    check_out(args.cache, "--cache")
    entries = load_entries()
    results = fetch(entries, args.cache, args.source)
    for path in not_entries(entries, args.source) if args.source else []:
        print(f"{'left out':<12} {path}: no entry of that definition and name in public/entries.json")
    previous = None
    for r in results:
        reason = "(same as above)" if r.reason and r.reason == previous else r.reason
        said = "; ".join(x for x in (reason, r.earlier_said()) if x)
        print(f"{r.status:<12} {r.entry.name}" + (f": {said}" if said else ""))
        previous = r.reason
    counts = {s: sum(r.status == s for r in results) for s in ("fetched", "missing", "refused", "not fetched")}
    earlier = {s: sum(r.earlier == s for r in results) for s in ("kept", "removed")}
    earlier_said = ", ".join(f"{n} {s}" for s, n in earlier.items() if n)
    print(f"{len(results)} entries: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
          + (f"; copies fetched earlier: {earlier_said}" if earlier_said else "") + f" (cache {args.cache})")
    return 0 if counts["fetched"] == len(results) else 1


def cmd_list(args):
    capability = device_capability_here()
    rows = [("name", "definition", "language/binding", "fetched", "runnable here", "why not, or what to expect")]
    for entry in load_entries():
        fetched, why = fetch_state(args.cache, entry)
        ok, why_not = runnable(entry, capability)
        rows.append((entry.name, entry.definition, f"{entry.language}/{binding_shown(entry)}",
                     "yes" if fetched else "no", "yes" if ok else "no", why or why_not))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[5])
    print(f"device here: {'sm_%d%d' % capability if capability else 'CPU (no CUDA GPU)'}")
    return 0


def binding_shown(entry):
    """No binding means tvm-ffi for CUDA (FlashInfer-Bench's default) and nothing for Python or Triton."""
    return entry.binding or ("tvm-ffi (default)" if entry.language == "cuda" else "-")


def cmd_run(args):
    """The public leaderboard run: every runnable fetched entry beside ours, the baseline and FLA, interleaved per
    workload; entries that cannot run here are listed with the reason. Exit status: our submission's pairs."""
    from harness.cli import dataset_of, device_of, exit_status, run_options, warn_ignored, workloads_per_definition
    from harness.eval.options import print_differences
    from harness.eval.console import run_definition
    from harness.full import RESULTS_ROOT, RunRecord, gpu_slug, record_run, start_from_results_cache
    from harness.data.resolve import resolve
    from harness.eval.give_up import GiveUpRule, input_elements

    device = device_of(args)
    if not device.startswith("cuda"):
        raise DataError("--device", "the public run times kernels on a GPU",
                        f"check a fetched entry on the CPU with eval: gdn-harness eval --solution "
                        f"{args.cache}/<definition>/<name>.json --device cpu --workloads 0 (gdn-harness public list "
                        "names them)")
    warn_ignored(args, device)
    import torch
    slug = gpu_slug(torch.cuda.get_device_name())
    out = Path(args.out or RESULTS_ROOT / slug / "public")
    start_from_results_cache(out, slug)
    dataset, capability, entries = dataset_of(args), device_capability_here(), load_entries()
    definitions = [dataset.definition(n) for n in (args.definition or sorted(dataset.definitions))]
    selected = workloads_per_definition(dataset, definitions, args.workloads)
    definitions = [d for d in definitions if d.name in selected]
    plans, not_run, ours = [], {}, {}
    for d in definitions:
        public, left_out = public_solutions(args.cache, d.name, entries, capability)
        extra = [sol for arg in args.solution for sol in resolve(arg, d, dataset, strict=False)]
        sols = [*resolve("ours", d, dataset), *resolve("baseline", d, dataset), *resolve("fla", d, dataset), *extra,
                *public]
        clash = sorted({s.name for s in sols if sum(t.name == s.name for t in sols) > 1})
        if clash:
            raise DataError("--solution", f"two solutions named {', '.join(clash)} for {d.name}",
                            "rename one (its Solution JSON's name)")
        ours[d.name], not_run[d.name] = sols[0].name, left_out
        for entry, why in left_out:
            print(f"{d.name}: {entry.name} is not run: {why}")
        # smallest first: the quick results come early, and an entry that times out does so on the larger rest
        workloads = sorted(selected[d.name], key=partial(input_elements, d))
        plans.append((d, workloads, sols))
    if args.entry_budget < 0:
        raise DataError("--entry-budget", f"{args.entry_budget:g} is negative", "give seconds, or 0 for no limit")
    rule = GiveUpRule(after=args.give_up_after or None, budget_s=args.entry_budget or None)
    runs = [replace(run_options(args, device, d, out), give_up=rule) for d in definitions]
    print_differences(*runs)
    results = []
    for (d, workloads, sols), opts in zip(plans, runs):
        started, stats = time.time(), {}
        found = run_definition(dataset, d, workloads, sols, opts, stats, table=False)
        record_run(out, RunRecord(d, sols, workloads, started, torch.cuda.get_device_name(), args.argv), args, stats)
        results += [r for r in found if r.solution.name == ours[d.name]]
    write_board(out, definitions, ours, entries, not_run)
    return exit_status(results, args)


def cmd_report(args):
    """The leaderboard again from a public run's folder (one that was stopped, resumed, or moved), without a GPU.
    The entries with no trace there are listed with the reason: cannot run on the GPU the traces were taken on,
    or simply no trace."""
    from harness.cli import dataset_of
    from harness.data.resolve import resolve

    out, dataset, entries = Path(args.out), dataset_of(args), load_entries()
    names = args.definition or sorted(dataset.definitions)
    found = {n: sorted(out.glob(f"traces/*/*/{n}.jsonl")) for n in names}
    definitions = [dataset.definition(n) for n in names if found[n]]
    if not definitions:
        raise DataError(out, "holds no traces of these definitions", "name the folder a public run wrote")
    ours, not_run = {}, {}
    for d in definitions:
        capability = traced_capability(found[d.name][0])
        traced = {json.loads(line)["solution"] for f in found[d.name] for line in f.read_text().splitlines() if line}
        mine = resolve("ours", d, dataset)[0].name
        ours[d.name] = mine if mine in traced else None
        if mine not in traced:   # e.g. a run stopped before ours ran on its first workload
            print(f"{d.name}: our solution {mine} has no trace in {out}: the leaderboard has no win rates against it")
        not_run[d.name] = [(e, why_not_traced(e, capability)) for e in entries
                           if e.definition == d.name and e.name not in traced]
    write_board(out, definitions, ours, entries, not_run)
    return 0


def why_not_traced(entry, capability):
    ok, why = runnable(entry, capability)
    return "no trace in this folder (not fetched, refused, or not reached)" if ok else why


def traced_capability(trace_file):
    """(major, minor) of the GPU a trace file's first trace was taken on, None for a CPU."""
    first = json.loads(Path(trace_file).read_text(encoding="utf-8").splitlines()[0])
    cc = first["evaluation"]["environment"]["libs"].get("compute_capability")  # e.g. "9.0"
    return tuple(int(x) for x in cc.split(".")) if cc else None
