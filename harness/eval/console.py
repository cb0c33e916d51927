"""What a run shows on the console: the per-workload table, every failure's reason and trace, a summary line."""
import math
import re

from harness.eval import loop
from harness.eval.loop import not_passed


def fmt_float(x, spec=".3g"):
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def _official(trace):
    """Whether a trace's latency is from a GPU timer (a CPU wall clock gives no official figure)."""
    from harness.eval.timing import CPU_LABEL
    return trace.evaluation.environment.libs.get("timer") != CPU_LABEL


def summary_table(results, index=None):
    """The per-workload table printed at the end of a run ('-' for speedups not officially timed): every pair with a
    trace, those kept from an earlier run (resume) marked 'kept'. '#' is the workload's index in its definition
    (`index`: uuid -> index; what --workloads takes), else the row's number."""
    axes_of = lambda r: ",".join(f"{k}={v}" for k, v in r.workload.axes.items())  # noqa: E731
    width = max([len(axes_of(r)) for r in results if r.trace is not None] + [4])
    rows = [f"{'#':>3} {'workload':<10} {'axes':<{width}} {'solution':<22} {'status':<20} {'max_abs':>9} "
            f"{'max_rel':>9} {'lat_ms':>9} {'speedup':>8}"]
    for i, r in enumerate(results):
        if r.trace is None:
            continue
        ev = r.trace.evaluation
        c, p = ev.correctness, ev.performance
        speedup = p.speedup_factor if p and _official(r.trace) else None
        abs_err, rel_err = (c.max_absolute_error, c.max_relative_error) if c else (None, None)
        n = index.get(r.workload.uuid, i) if index else i
        rows.append(f"{n:>3} {r.workload.uuid[:8]:<10} {axes_of(r):<{width}} {r.solution.name[:22]:<22} "
                    f"{ev.status.value:<20} {fmt_float(abs_err):>9} {fmt_float(rel_err):>9} "
                    f"{fmt_float(p.latency_ms if p else None, '.4f'):>9} {fmt_float(speedup, '.2f'):>8}"
                    + (" kept" if r.skipped else ""))
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


# a traceback frame in the build cache's copy of a Python or Triton solution (builders.build): <cache>/builds/<lang>/
# <package>/<package>/<source path>
_BUILD_COPY = re.compile(r'File "[^"]*/builds/(?:python|triton)/(fib_sol_[0-9a-f]+)/\1/([^"]+)"')


def in_source_terms(line):
    """A failure line with frames of the build cache's copy named by the solution's own source path."""
    return _BUILD_COPY.sub(r'File "\2" (its copy in the build cache)', line)


def print_failures(results, limit=20):
    """Every pair that is not PASSED, evaluated in this run or kept from an earlier one: its reason and its trace
    file (the first `limit` in full)."""
    bad = not_passed(results)
    for r in bad[:limit]:
        ev = r.trace.evaluation
        kept = f" (kept from an earlier run, {ev.timestamp[:19]}: --no-resume evaluates it again)" if r.skipped else ""
        print(f"  {ev.status.value}: {r.solution.name} on {r.workload.uuid[:8]}{kept}")
        for line in failure_reason(ev.log):
            print(f"      {in_source_terms(line)[:300]}")
        if ev.status.value == "TIMEOUT":   # the official message names no option
            print("      (the pair's --timeout; give it more with --timeout SECONDS)")
        print(f"      trace: {r.trace_file}")
    if len(bad) > limit:
        print(f"  ... and {len(bad) - limit} more not PASSED (their traces say why)")


def message_kind(text):
    """A message with its numbers masked: messages that differ only in figures are one kind."""
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", text)


def print_warnings(results, limit=8):
    """The harness warnings of the pairs evaluated in this run (a PASSED pair's are otherwise only in its trace and
    harness/*.jsonl): each kind once per solution (numbers aside), with how many pairs raised it."""
    kinds = {}
    for r in results:
        for w in r.warnings or []:
            kind = (r.solution.name, message_kind(w))
            example, n = kinds.get(kind, (w, 0))
            kinds[kind] = (example, n + 1)
    for (name, _), (example, n) in list(kinds.items())[:limit]:
        print(f"  warning: {name}: {example[:300]} ({n} pair{'s' if n != 1 else ''})")
    if len(kinds) > limit:
        print(f"  ... and {len(kinds) - limit} more kinds of warning (the traces' logs, harness/*.jsonl)")


def run_definition(dataset, definition, workloads, solutions, opts, stats=None, table=True):
    """evaluate() with what the console shows: the plan, the per-workload table, every failure's reason and a
    one-line summary."""
    print(f"{definition.name}: {len(workloads)} workload{'s' * (len(workloads) != 1)} x {[s.name for s in solutions]} "
          f"on {opts.device}; traces -> {opts.out_dir}/traces/")
    results = loop.evaluate(dataset, definition, workloads, solutions, opts, stats)
    if table:
        print(summary_table(results, {w.uuid: i for i, w in enumerate(dataset.workloads(definition))}))
    print_failures(results)
    print_warnings(results)
    done = [r for r in results if not r.skipped]
    kept = [r for r in results if r.skipped and r.trace is not None]
    given_up = {}
    for r in results:
        if r.not_run:
            given_up.setdefault(r.solution.name, []).append(r)
    for name, rs in given_up.items():
        print(f"{definition.name}: {name}: {len(rs)} pair(s) {rs[0].not_run}")
    inputs = sorted({r.trace.evaluation.environment.libs.get("inputs", "?") for r in done + kept})
    not_run = sum(map(len, given_up.values()))
    traced = done + kept
    bad = len(not_passed(traced))
    print(f"{definition.name}: {len(done)} pair{'s' if len(done) != 1 else ''} evaluated"
          + (f", {len(kept)} kept from an earlier run (same content, hardware and settings)" if kept else "")
          + (f", {not_run} not run" if not_run else "")
          + f"; {len(traced) - bad} PASSED, {bad} not; inputs: {', '.join(inputs) or '-'}")
    return results
