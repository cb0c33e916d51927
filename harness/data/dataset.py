"""A dataset root in the FlashInfer-Bench layout: definitions/ workloads/ solutions/ traces/ blob/."""
import fcntl
import os
from pathlib import Path

from harness import REPO
from harness.data.definition import Definition
from harness.data.jsonio import DataError, dumps, read_jsonl
from harness.data.solution import Solution
from harness.data.trace import Trace
from harness.data.workload import load_workloads

DEFAULT_ROOT = REPO / "workloads"


class Dataset:
    def __init__(self, root=DEFAULT_ROOT):
        self.root = Path(root).resolve()
        if not (self.root / "definitions").is_dir():
            raise DataError(self.root, "not a dataset root: no definitions/ folder",
                            "point --dataset at a folder holding definitions/ workloads/ solutions/")
        self._definitions = None

    @property
    def definitions(self):
        if self._definitions is None:
            defs = {}
            for path in sorted((self.root / "definitions").rglob("*.json")):
                d = Definition.load(path)
                if d.name in defs:
                    raise DataError(path, f"definition '{d.name}' is defined twice (also in {defs[d.name][1]})")
                defs[d.name] = (d, path)
            self._definitions = defs
        return {k: v[0] for k, v in self._definitions.items()}

    def definition(self, name):
        defs = self.definitions
        if name not in defs:
            raise DataError(self.root, f"unknown definition {name!r}", f"one of {sorted(defs)}")
        return defs[name]

    def workloads(self, definition):
        """The definition's workloads in file order, each checked against the definition."""
        out = []
        for path in sorted((self.root / "workloads").rglob("*.jsonl")):
            for def_name, w, where in load_workloads(path):
                if def_name == definition.name:
                    w.check_against(definition, where)
                    out.append(w)
        if not out:
            raise DataError(self.root / "workloads", f"no workloads for definition {definition.name!r}")
        return out

    def solutions(self, definition_name=None):
        out = []
        for path in sorted((self.root / "solutions").rglob("*.json")):
            s = Solution.load(path)
            if definition_name is None or s.definition == definition_name:
                out.append(s)
        return out

    def blob_path(self, relative):
        """Resolve a workload's blob path; refuse anything that leaves the root."""
        p = (self.root / relative).resolve()
        if self.root not in p.parents:
            raise DataError(relative, "blob path escapes the dataset root", "use a path under ./blob/")
        return p


def trace_path(out_root, author, op_type, definition_name):
    return Path(out_root) / "traces" / author / op_type / f"{definition_name}.jsonl"


def extras_path(out_root, definition_name):
    """What the harness measures beyond the official trace (event time, timer, warnings), one line a pair."""
    return Path(out_root) / "harness" / f"{definition_name}.jsonl"


def append_trace(path, trace):
    append_jsonl(path, trace.to_json())


def append_jsonl(path, obj):
    append_jsonl_text(path, dumps(obj) + "\n")


def append_jsonl_text(path, line):
    """Append one line (text ending in a newline) atomically: one write under an exclusive lock, then fsync.

    A line cut short by a killed writer is removed first, so the file stays valid JSONL."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = line.encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size:
            os.lseek(fd, size - 1, os.SEEK_SET)
            if os.read(fd, 1) != b"\n":
                _drop_partial_last_line(fd, size)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _drop_partial_last_line(fd, size):
    chunk = min(size, 1 << 20)
    os.lseek(fd, size - chunk, os.SEEK_SET)
    tail = os.read(fd, chunk)
    cut = tail.rfind(b"\n")
    os.ftruncate(fd, size - chunk + cut + 1 if cut >= 0 else 0)


def read_traces(path):
    """Traces of a file; a partial last line (interrupted writer) is skipped, anything else malformed raises."""
    path = Path(path)
    if not path.exists():
        return []
    return [Trace.from_json(obj, where) for where, obj in read_jsonl(path, allow_partial_tail=True)]
