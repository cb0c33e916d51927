"""JSON/JSONL round trips against the official field names; malformed files are refused by name."""
import json
import math
import os

import pytest

from harness.data.dataset import Dataset, append_trace, read_traces
from harness.data.definition import Definition
from harness.data.jsonio import DataError
from harness.data.solution import Solution
from harness.data.trace import Correctness, Environment, Evaluation, Performance, Status, Trace
from harness.data.workload import Workload, load_workloads, workload_line
from tests.toy import make_toy_root, toy_solution

ROOT = Dataset().root
DEFS = sorted((ROOT / "definitions").rglob("*.json"))
WORKLOADS = sorted((ROOT / "workloads").rglob("*.jsonl"))


@pytest.mark.parametrize("path", DEFS, ids=lambda p: p.stem)
def test_definition_round_trip(path):
    original = json.loads(path.read_text())
    assert Definition.load(path).to_json() == original


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_workload_round_trip(path):
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    loaded = load_workloads(path)
    assert len(loaded) == len(lines)
    for (def_name, w, _), line in zip(loaded, lines):
        assert workload_line(def_name, w) == line


def test_official_dataset_counts():
    ds = Dataset()
    assert len(ds.workloads(ds.definition("gdn_decode_qk4_v8_d128_k_last"))) == 54
    assert len(ds.workloads(ds.definition("gdn_prefill_qk4_v8_d128_k_last"))) == 100


def test_solution_round_trip():
    obj = toy_solution("s", "def run(x, y, alpha, z):\n    pass\n")
    obj["description"] = "d"
    assert Solution.from_json(obj, "x").to_json() == obj


def _trace(status, **kw):
    w = Workload.from_json({"uuid": "u", "axes": {"n": 1}, "inputs": {"x": {"type": "random"}}}, "w")
    ev = Evaluation(status, Environment("NVIDIA H200", {"torch": "2.11"}), "2026-11-29T00:00:00", "log", **kw)
    return Trace("d", w, "s", ev)


def test_trace_round_trip_and_nan_strings():
    tr = _trace(Status.INCORRECT_NUMERICAL, correctness=Correctness(math.nan, math.inf))
    obj = tr.to_json()
    text = json.dumps(obj, allow_nan=False)  # must not need NaN literals
    assert '"max_relative_error": "NaN"' in text and '"max_absolute_error": "Infinity"' in text
    assert '"extra": null' in text   # FIB's model writes every field, None included
    back = Trace.from_json(json.loads(text), "t")
    assert math.isnan(back.evaluation.correctness.max_relative_error)
    assert math.isinf(back.evaluation.correctness.max_absolute_error)
    assert back.to_json()["evaluation"]["status"] == "INCORRECT_NUMERICAL"


def test_status_field_rule():
    with pytest.raises(ValueError):
        _trace(Status.PASSED, correctness=Correctness())  # PASSED needs performance too
    with pytest.raises(ValueError):
        _trace(Status.RUNTIME_ERROR, correctness=Correctness())
    ok = _trace(Status.PASSED, correctness=Correctness(), performance=Performance(1.0, 2.0, 2.0))
    assert ok.to_json()["evaluation"]["performance"] == {"latency_ms": 1.0, "reference_latency_ms": 2.0,
                                                         "speedup_factor": 2.0}
    # FIB's Performance has no inf/NaN-as-strings setting: pydantic writes a non-finite float as null
    inf = _trace(Status.PASSED, correctness=Correctness(), performance=Performance(1.0, math.inf, math.inf))
    assert inf.to_json()["evaluation"]["performance"] == {"latency_ms": 1.0, "reference_latency_ms": None,
                                                          "speedup_factor": None}


def _bad_def(tmp_path, mutate):
    obj = json.loads(DEFS[0].read_text())
    mutate(obj)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(obj))
    return p


@pytest.mark.parametrize("mutate,needle", [
    (lambda o: o.pop("reference"), "missing required field 'reference'"),
    (lambda o: o["inputs"]["q"].update(shape=["batch_size", "nope"]), "unknown axis 'nope'"),
    (lambda o: o["inputs"]["q"].update(dtype="float7"), "unknown dtype 'float7'"),
    (lambda o: o["axes"]["batch_size"].update(type="sometimes"), "'axes.batch_size.type'"),
    (lambda o: o.update(constraints=["a >"]), "is not a Python expression"),
    (lambda o: o.update(name=5), "field 'name' must be str"),
])
def test_malformed_definition_names_file_and_field(tmp_path, mutate, needle):
    p = _bad_def(tmp_path, mutate)
    with pytest.raises(DataError) as exc:
        Definition.load(p)
    assert needle in str(exc.value) and str(p) in str(exc.value)


def test_truncated_json_names_line(tmp_path):
    p = tmp_path / "w.jsonl"
    good = WORKLOADS[0].read_text().splitlines()[0]
    p.write_text(good + "\n" + good[:50] + "\n")
    with pytest.raises(DataError, match=r"w\.jsonl:2: invalid JSON"):
        load_workloads(p)


@pytest.mark.parametrize("patch,needle", [
    ({"workload": {"uuid": "u", "axes": {"batch_size": "one"}, "inputs": {}}}, "'axes.batch_size' must be an integer"),
    ({"workload": {"uuid": "u", "axes": {}, "inputs": {"q": {"type": "safetensors", "path": "../x",
                                                             "tensor_key": "q"}}}}, "escapes the dataset root"),
    ({"workload": {"uuid": "u", "axes": {}, "inputs": {"q": {"type": "magic"}}}}, "must be random, scalar or"),
])
def test_malformed_workload(tmp_path, patch, needle):
    p = tmp_path / "w.jsonl"
    p.write_text(json.dumps({"definition": "d", "solution": None, "evaluation": None, **patch}) + "\n")
    with pytest.raises(DataError, match=needle):
        load_workloads(p)


def test_workload_must_match_definition(tmp_path):
    root = make_toy_root(tmp_path)
    p = root / "workloads" / "toy" / "toy_axpy.jsonl"
    line = json.loads(p.read_text().splitlines()[0])
    line["workload"]["axes"] = {"m": 3}
    p.write_text(json.dumps(line) + "\n")
    ds = Dataset(root)
    with pytest.raises(DataError,
                       match=r"axes do not match definition 'toy_axpy' \(missing \['n'\], unknown \['m'\]\)"):
        ds.workloads(ds.definition("toy_axpy"))


@pytest.mark.parametrize("mutate,needle", [
    (lambda o: o["spec"].update(entry_point="main.py"), "exactly one '::'"),
    (lambda o: o["spec"].update(entry_point="other.py::run"), "is not among the sources"),
    (lambda o: o["sources"].append({"path": "/etc/passwd", "content": "x"}), "must be relative"),
    (lambda o: o["sources"].append({"path": "a/../../b.py", "content": "x"}), "must be relative"),
    (lambda o: o["sources"].append(dict(o["sources"][0])), "appears twice"),
    (lambda o: o["spec"].update(language="fortran"), "'spec.language' must be one of"),
    # author and name are folder names (traces/<author>/): none may lead out of the output folder
    (lambda o: o.update(author="../../escaped"), "'author' '../../escaped' is not one folder name"),
    (lambda o: o.update(author="/tmp/abs"), "'author' '/tmp/abs' is not one folder name"),
    (lambda o: o.update(author=".."), "'author' '..' is not one folder name"),
    (lambda o: o.update(name="a/b"), "'name' 'a/b' is not one folder name"),
])
def test_malformed_solution(mutate, needle):
    obj = toy_solution("s", "def run(x, y, alpha, z):\n    pass\n")
    mutate(obj)
    with pytest.raises(DataError, match=needle):
        Solution.from_json(obj, "sol.json")


def test_append_is_whole_lines_and_heals_a_partial_tail(tmp_path, capsys):
    p = tmp_path / "traces" / "t.jsonl"
    tr = _trace(Status.RUNTIME_ERROR)
    append_trace(p, tr)
    with open(p, "ab") as f:  # a writer killed mid-line
        f.write(b'{"definition": "d", "workl')
    assert len(read_traces(p)) == 1  # the partial line is left out when reading, and said
    assert f"note: {p}:2: a partial last line" in capsys.readouterr().err
    assert len(read_traces(p)) == 1 and capsys.readouterr().err == ""   # once: a resumed run reads it twice
    append_trace(p, tr)
    lines = p.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["solution"] == "s" for x in lines)


def test_not_a_dataset_root(tmp_path):
    with pytest.raises(DataError, match="no definitions/ folder"):
        Dataset(tmp_path)
    os.makedirs(tmp_path / "definitions")
    with pytest.raises(DataError, match="unknown definition 'x'"):
        Dataset(tmp_path).definition("x")
