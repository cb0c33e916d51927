"""The shipped sources under submission/ carry code and the comments that explain it, not tuning history: no round,
session or stop numbers, no sweep logs, no commit hashes in their comments or docstrings. The measurements behind the
launch tables live in docs/kernels/ (prefill.md, decode.md). Only comment and docstring text is scanned (tokenize's
COMMENT tokens and the string statements that are docstrings), so code identifiers never match. Offline, no GPU."""
import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUBMISSION = ROOT / "submission"

# history markers: each (name, pattern), matched case-insensitively against comment / docstring text
MARKERS = [
    ("round number", re.compile(r"\brounds? \d+", re.I)),
    ("round tag", re.compile(r"\br\d{1,3}\b", re.I)),
    ("sweep", re.compile(r"\bsweeps?\b", re.I)),
    ("session number", re.compile(r"\bsessions? \d+", re.I)),
    ("stop number", re.compile(r"\bstops? \d+", re.I)),
]
_HEX_WORD = re.compile(r"\b[0-9a-f]{7,40}\b", re.I)


def _is_hash(word):
    """A word of 7-40 hex digits with both a letter and a digit in it: what a commit hash looks like."""
    return bool(re.search(r"[0-9]", word) and re.search(r"[a-f]", word, re.I))


def prose(src):
    """(line, text) of every comment and docstring (any statement that is a bare string) of a Python source."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(src)):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            for stmt in stmts if isinstance(stmts, list) else []:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str):
                    out.append((stmt.lineno, stmt.value.value))
    return out


def _text_comments(src):
    """(line, text) of the '#' comments of a non-Python text file (config.toml and the like)."""
    return [(i, line[line.index("#"):]) for i, line in enumerate(src.splitlines(), 1) if "#" in line]


def history_markers(src, python=True):
    """Every history marker in the comments and docstrings of `src`: (line, marker name, matched text)."""
    hits = []
    for line, text in (prose(src) if python else _text_comments(src)):
        found = [(m.start(), name, m.group(0)) for name, pat in MARKERS for m in pat.finditer(text)]
        found += [(m.start(), "commit hash", m.group(0)) for m in _HEX_WORD.finditer(text) if _is_hash(m.group(0))]
        hits += [(line + text.count("\n", 0, at), name, word) for at, name, word in sorted(found)]
    return hits


def _shipped_files():
    return sorted(p for p in SUBMISSION.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix != ".pyc")


def test_scanner_finds_markers():
    src = ('"""Module doc: sweep r13 picked BV."""\n'
           "r12 = 3  # round 29: +2 us at 3fa9c1d\n"
           "def f(r41):\n"
           '    """session 23, stop 25."""\n'
           '    return "round 7"  # a string in code is not scanned\n')
    names = {(line, name) for line, name, _ in history_markers(src)}
    assert names == {(1, "sweep"), (1, "round tag"), (2, "round number"), (2, "commit hash"),
                     (4, "session number"), (4, "stop number")}
    clean = ('"""fp16 operands, rounded to a multiple of 2^-24; bf16 hi + lo, 1e-3; deadbeef, 1234567."""\n'
             "r2 = round(3.5)  # one round trip; BV=32 from N = 16\n")
    assert history_markers(clean) == []


@pytest.mark.parametrize("path", _shipped_files(), ids=lambda p: str(p.relative_to(SUBMISSION)))
def test_no_history_in_shipped_sources(path):
    src = path.read_text()
    hits = history_markers(src, python=path.suffix == ".py")
    assert not hits, (f"{path.relative_to(ROOT)}: tuning history in comments (move it to docs/kernels/): "
                      + "; ".join(f"line {line} {name}: {text!r}" for line, name, text in hits[:20])
                      + (f"; ... {len(hits) - 20} more" if len(hits) > 20 else ""))
