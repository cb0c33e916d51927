"""Strict JSON/JSONL reading and official-style writing.

Every loading error names the file, the line (for JSONL) and the field, so a user can fix it;
nothing is half-loaded: a file either loads whole or raises DataError.
"""
import json
import math
import os
import sys
import tempfile
from pathlib import Path


class DataError(ValueError):
    """A malformed or inconsistent data file. The message names file, line and field."""

    def __init__(self, where, message, hint=None):
        self.where, self.message, self.hint = str(where), message, hint
        text = f"{where}: {message}"
        if hint:
            text += f" (fix: {hint})"
        super().__init__(text)


def read_json(path):
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(path, f"cannot read file: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}", f"invalid JSON: {exc.msg} at column {exc.colno}") from None


def read_json_object(path, what, hint=None):
    """The JSON object in `path`, {} if there is no such file; DataError naming the file if it cannot be read, does
    not parse or holds something else (`what`: what the object maps, for the message)."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(path, f"cannot read file: {exc.strerror}", hint) from None
    except ValueError as exc:
        raise DataError(path, f"not valid JSON ({exc})", hint) from None
    if not isinstance(data, dict):
        raise DataError(path, f"expected an object of {what}, found {type(data).__name__}", hint)
    return data


_PARTIAL_NOTED = set()   # the partial last lines already said, as "path:line"


def read_jsonl(path, allow_partial_tail=False):
    """(where, object) for each non-blank line; the whole file is parsed before returning.

    allow_partial_tail: skip a last line with no newline (a writer killed mid-line), with a note on stderr."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(path, f"cannot read file: {exc.strerror}") from None
    if allow_partial_tail and text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        where = f"{path}:{len(text.splitlines()) + 1}"
        if where not in _PARTIAL_NOTED:   # said once: a run reads a file more than once (retire, then resume)
            _PARTIAL_NOTED.add(where)
            print(f"note: {where}: a partial last line (a writer stopped mid-line) is left out; the next append to "
                  "this file drops it", file=sys.stderr)
    lines = text.splitlines()
    rows = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append((f"{path}:{lineno}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{lineno}", f"invalid JSON: {exc.msg} at column {exc.colno}",
                            "a truncated last line usually means an interrupted writer; delete it"
                            if lineno == len(lines) else
                            f"line {lineno} of {len(lines)} was edited or damaged: fix or delete it (the other "
                            "lines are intact)") from None
    return rows


def encode_float(x):
    """NaN and infinities serialise as strings, as pydantic's ser_json_inf_nan='strings' does."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return x


def decode_float(x, where, field):
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise DataError(where, f"field '{field}' must be a number, got {type(x).__name__}")
    if isinstance(x, str):
        try:
            return float({"Infinity": "inf", "-Infinity": "-inf"}.get(x, x))
        except ValueError:
            raise DataError(where, f"field '{field}' must be a number, got {x!r}") from None
    return float(x)


def dumps(obj, **kw):
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, **kw)


def write_json_atomic(path, obj):
    """Write a whole JSON file (mode 0644, not mkstemp's 0600) atomically: readers never see half a file."""
    write_text_atomic(path, dumps(obj, indent=2) + "\n")


def write_text_atomic(path, text):
    """Write a whole text file (mode 0644) through a temporary file and rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


class Fields:
    """Typed access to one JSON object, raising DataError that names where and which field."""

    def __init__(self, obj, where, what):
        if not isinstance(obj, dict):
            raise DataError(where, f"{what} must be a JSON object, got {type(obj).__name__}")
        self.obj, self.where, self.what = obj, where, what

    def req(self, key, types, prefix=""):
        if key not in self.obj:
            raise DataError(self.where, f"{self.what}: missing required field '{prefix}{key}'")
        return self._typed(key, self.obj[key], types, prefix)

    def opt(self, key, types, default=None, prefix=""):
        if key not in self.obj or self.obj[key] is None:
            return default
        return self._typed(key, self.obj[key], types, prefix)

    def _typed(self, key, value, types, prefix):
        types = types if isinstance(types, tuple) else (types,)
        if isinstance(value, bool) and bool not in types:
            ok = False
        else:
            ok = isinstance(value, types)
        if not ok:
            names = "/".join(t.__name__ for t in types)
            raise DataError(self.where, f"{self.what}: field '{prefix}{key}' must be {names}, "
                                        f"got {type(value).__name__}")
        return value

    def sub(self, key, what, prefix=""):
        return Fields(self.req(key, dict, prefix), self.where, what)


def loader_refuses(where, subject, problem, hint=None):
    """What FIB's pydantic models refuse (subject: "solution 'name'", "definition 'name'", "workload uuid"): the
    whole official dataset load fails on it."""
    return DataError(where, f"{subject}: {problem}; FlashInfer-Bench's loader refuses it, so the official dataset "
                            "load would fail", hint)


def harness_refuses(where, subject, problem, official, hint=None):
    """What this harness refuses on purpose and FIB's loader takes (official: what FIB does with it)."""
    return DataError(where, f"{subject}: {problem}; this harness refuses it, stricter than FlashInfer-Bench's "
                            f"loader ({official})", hint)
