"""Traces in the output folder: keyed by solution content and the run's GPU and settings (resume, stale traces moved
out of traces/), and built from a child's outcome."""
import datetime
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from harness.data.dataset import append_jsonl_text, read_traces, trace_path
from harness.data.jsonio import DataError, read_jsonl, write_text_atomic
from harness.data.trace import Correctness, Environment, Evaluation, Performance, Status, Trace


def now():
    return datetime.datetime.now().isoformat()  # local time, no zone: as officially


def solution_digest(solution):
    """What resume and the traces key a solution by: its spec and sources (not its name, author or
    description), so an edited solution is evaluated again and two different ones under one name differ."""
    body = {"definition": solution.definition, "spec": solution.spec.to_json(),
            "sources": [[s.path, s.content] for s in solution.sources]}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def eval_settings(opts, timing):
    """The settings of a run that can change a trace's verdict or latency, as the readable string a trace keeps in
    environment.libs['eval_settings']: tolerances, timeout, timing (warmup/iterations/trials), timer, seed,
    isolation and --strict. Off a GPU --timer has no effect (wall clock), so it is kept as the default there: a
    rerun with another --timer keeps the traces."""
    t = opts.tolerance
    timer = opts.timer if str(opts.device).startswith("cuda") else "auto"
    return (f"atol={t.atol:g} rtol={t.rtol:g} matched_ratio={t.required_matched_ratio:g} timeout={opts.timeout:g}s "
            f"timing={timing.warmup}/{timing.iters}/{timing.trials} timer={timer} seed={opts.seed} "
            f"isolation={opts.isolation} strict={int(opts.strict)}")


@dataclass(frozen=True)
class RunKey:
    """What a trace must share with this run, beside its solution's content, for a resumed run to keep it: the
    hardware it ran on and eval_settings. A trace written before traces kept their settings is matched on its
    hardware alone."""
    hardware: str
    settings: str

    def matches(self, env):
        """Whether a trace's environment (its hardware and libs) is this run's."""
        return env.hardware == self.hardware and env.libs.get("eval_settings", self.settings) == self.settings


def kept_traces(out_dir, solutions, definition, run):
    """The traces in out_dir written for the same solution content on the same hardware and settings (RunKey `run`):
    those a resumed run keeps."""
    for sol in solutions:
        digest = solution_digest(sol)
        for tr in read_traces(trace_path(out_dir, sol.author, definition.op_type, definition.name)):
            if tr.solution == sol.name and tr.evaluation is not None \
                    and tr.evaluation.environment.libs.get("solution_digest") == digest \
                    and run.matches(tr.evaluation.environment):
                yield tr


def kept_pairs(out_dir, solutions, definition, run):
    """{(name, uuid): trace} of the pairs a resumed run keeps (kept_traces; the last trace of a pair)."""
    return {(tr.solution, tr.workload.uuid): tr for tr in kept_traces(out_dir, solutions, definition, run)}


def stale_path(out_root, author, op_type, definition_name):
    """Where traces that no longer describe their solution go: out of traces/, so no report reads them."""
    return Path(out_root) / "stale" / author / op_type / f"{definition_name}.jsonl"


def retire_traces(out_dir, definition, solutions, workloads, opts, run):
    """Move out of traces/ every trace of these solutions that a report must not read: those written for other
    content under the same name (an edited solution, or another one named alike), those of other hardware or settings
    (RunKey `run`: a CPU check before a GPU run, other tolerances...) and, without opts.resume, those of the pairs
    about to be evaluated again. They go to <out>/stale/ (appended there first, so nothing is lost if this is killed);
    returns {solution name: (traces of other content, of other hardware or settings, replaced)}."""
    uuids = {w.uuid for w in workloads}
    moved = {}
    for author in sorted({s.author for s in solutions}):
        path = trace_path(out_dir, author, definition.op_type, definition.name)
        if not path.exists():
            continue
        digests = {s.name: solution_digest(s) for s in solutions if s.author == author}
        for where, obj in read_jsonl(path, allow_partial_tail=True):   # a broken line: a DataError naming it
            if not isinstance(obj, dict):
                raise DataError(where, f"a trace must be a JSON object, got {type(obj).__name__}",
                                "fix or delete that line (the other traces are intact)")
        keep, retire = [], []
        text = path.read_text(encoding="utf-8")
        for line in text[: text.rfind("\n") + 1].splitlines(keepends=True):
            obj = json.loads(line) if line.strip() else {}
            name = obj.get("solution")
            if name not in digests or not obj.get("evaluation"):
                keep.append(line)
                continue
            env = obj["evaluation"].get("environment") or {}
            other = env.get("libs", {}).get("solution_digest") != digests[name]
            elsewhere = not other and not run.matches(Environment(env.get("hardware"), env.get("libs", {})))
            again = not opts.resume and obj["workload"]["uuid"] in uuids
            if other or elsewhere or again:
                retire.append(line)
                counts = moved.setdefault(name, [0, 0, 0])
                counts[0 if other else 1 if elsewhere else 2] += 1
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
    evaluation = Evaluation(status, env, outcome.get("timestamp") or now(), text, correctness, performance)
    return Trace(definition.name, workload, solution.name, evaluation)
