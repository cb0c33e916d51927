"""Traces in the output folder: keyed by solution content (resume, stale traces moved out of traces/), and
built from a child's outcome."""
import datetime
import hashlib
import json
from pathlib import Path

from harness.data.dataset import append_jsonl_text, read_traces, trace_path
from harness.data.jsonio import write_text_atomic
from harness.data.trace import Correctness, Evaluation, Performance, Status, Trace


def now():
    return datetime.datetime.now().isoformat()  # local time, no zone: as officially


def solution_digest(solution):
    """What resume and the traces key a solution by: its spec and sources (not its name, author or
    description), so an edited solution is evaluated again and two different ones under one name differ."""
    body = {"definition": solution.definition, "spec": solution.spec.to_json(),
            "sources": [[s.path, s.content] for s in solution.sources]}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def kept_traces(out_dir, solutions, definition):
    """The traces in out_dir written for the same solution content (those a resumed run keeps)."""
    for sol in solutions:
        digest = solution_digest(sol)
        for tr in read_traces(trace_path(out_dir, sol.author, definition.op_type, definition.name)):
            if tr.solution == sol.name and tr.evaluation is not None \
                    and tr.evaluation.environment.libs.get("solution_digest") == digest:
                yield tr


def done_pairs(out_dir, solutions, definition):
    """(name, uuid) of the pairs traced in out_dir for the same solution content."""
    return {(tr.solution, tr.workload.uuid) for tr in kept_traces(out_dir, solutions, definition)}


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
    evaluation = Evaluation(status, env, outcome.get("timestamp") or now(), text, correctness, performance)
    return Trace(definition.name, workload, solution.name, evaluation)
