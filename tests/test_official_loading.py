"""Loading as FlashInfer-Bench's loader does, and skipping what its isolated runner skips.

What FIB's pydantic models refuse (a dtype outside its DType enum, a negative axis, a reference without a top-level
`def run`) is refused at load with its wording; where this harness refuses more, the message says it is stricter.
A workload whose baseline cannot be built (a blob that cannot give its inputs, a reference whose result does not fit
the outputs) is skipped with a printed line and no trace, while the other workloads run, as FIB's run_all does."""
import json

import pytest
import torch
from safetensors.torch import save_file

from harness.data.dataset import Dataset
from harness.data.definition import Definition
from harness.data.jsonio import DataError
from harness.data.solution import Solution
from harness.data.workload import Workload, load_workloads
from harness.eval.child import TimingConfig
from harness.eval.loop import evaluate
from harness.eval.options import EvalOptions
from tests.toy import TOY_DEF, make_toy_root, toy_solution

GOOD = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"
REFUSES = "FlashInfer-Bench's loader refuses it, so the official dataset load would fail"
STRICTER = "this harness refuses it, stricter than FlashInfer-Bench's loader (which accepts it"
BLOB = "./blob/toy/bad.safetensors"


def _row(uuid, n, path, alpha):
    """A toy workload row whose x and y are read from the blob at `path`."""
    blob = {k: {"type": "safetensors", "path": path, "tensor_key": k} for k in ("x", "y")}
    return {"uuid": uuid, "axes": {"n": n}, "inputs": {**blob, "alpha": {"type": "scalar", "value": alpha}}}


def _root_with_a_bad_blob(tmp, write_bad):
    """A toy root with two workloads: w-bad (n = 4) reads blob/toy/bad.safetensors, written by `write_bad`; w-good
    (n = 4) reads the toy's real blob, x = arange(8) as 4 x 2 and y = ones."""
    root = make_toy_root(tmp / "toy")
    write_bad(root / "blob" / "toy" / "bad.safetensors")
    rows = [_row("w-bad", 4, BLOB, 1.0), _row("w-good", 4, "./blob/toy/real.safetensors", 2.0)]
    _write_workloads(root, rows)
    return root


def _write_workloads(root, rows):
    (root / "workloads" / "toy" / "toy_axpy.jsonl").write_text(
        "".join(json.dumps({"definition": "toy_axpy", "solution": None, "workload": r, "evaluation": None}) + "\n"
                for r in rows))


def _opts(tmp, **kw):
    return EvalOptions(device="cpu", out_dir=tmp / "out", timing=TimingConfig(0, 1, 1), show_progress=False,
                       profile_baseline=False, isolation="worker", timeout=60, **kw)


def _traced(tmp):
    path = tmp / "out" / "traces" / "tester" / "toy" / "toy_axpy.jsonl"
    return [json.loads(line)["workload"]["uuid"] for line in path.read_text().splitlines()]


def _wrong_shape(p):
    save_file({"x": torch.zeros(3, 2), "y": torch.zeros(4, 2)}, str(p))


def _wrong_dtype(p):
    save_file({"x": torch.zeros(4, 2, dtype=torch.float16), "y": torch.zeros(4, 2)}, str(p))


def _missing_key(p):
    save_file({"y": torch.zeros(4, 2)}, str(p))


def _lfs_pointer(p):
    p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 1234\n")


def _truncated(p):
    _wrong_shape(p)
    p.write_bytes(p.read_bytes()[:40])


BAD_BLOBS = {
    "wrong shape": (_wrong_shape, "tensor 'x' (input 'x') is (3, 2) torch.float32; the definition wants (4, 2) "
                                  "torch.float32)"),
    "wrong dtype": (_wrong_dtype, "tensor 'x' (input 'x') is (4, 2) torch.float16; the definition wants (4, 2) "
                                  "torch.float32)"),
    "missing key": (_missing_key, "tensor_key 'x' (input 'x') not in file; has ['y'])"),
    "git-LFS pointer": (_lfs_pointer, "the file is a git-LFS pointer, not the blob (fix: run `git lfs pull` in "
                                      "the dataset's repository; the official loader pulls it itself))"),
    "truncated": (_truncated, "cannot read safetensors file: "),
}


@pytest.mark.parametrize("fault", list(BAD_BLOBS))
def test_a_workload_whose_blob_cannot_give_its_inputs_is_skipped_and_the_next_passes(tmp_path, capsys, fault):
    write_bad, detail = BAD_BLOBS[fault]
    ds = Dataset(_root_with_a_bad_blob(tmp_path, write_bad))
    toy = ds.definition("toy_axpy")
    assert [w.uuid for w in ds.workloads(toy)] == ["w-bad", "w-good"]      # loads: nothing wrong in the schema
    sol = Solution.from_json(toy_solution("good", GOOD), "good")
    results = evaluate(ds, toy, ds.workloads(toy), [sol], _opts(tmp_path))
    assert [(r.workload.uuid, r.trace.evaluation.status.value) for r in results] == [("w-good", "PASSED")]
    assert _traced(tmp_path) == ["w-good"]
    out = capsys.readouterr().out
    bad = ds.root / "blob" / "toy" / "bad.safetensors"
    assert (f"toy_axpy: workload w-bad skipped, no trace written: its baseline could not be built from its blobs "
            f"({bad}: ") in out
    assert detail in out


def test_a_stale_stand_in_says_how_to_renew_it_and_a_missing_blob_is_still_synthesised(tmp_path, capsys):
    root = make_toy_root(tmp_path / "toy")
    rows = [_row("w-stale", 4, BLOB, 1.0), _row("w-new", 3, "./blob/toy/new.safetensors", 1.0)]
    _write_workloads(root, rows)
    # a stand-in written for n = 5 earlier (the mark the stand-in writer puts), now read for n = 4
    save_file({"x": torch.zeros(5, 2), "y": torch.zeros(5, 2)}, str(root / "blob" / "toy" / "bad.safetensors"),
              metadata={"gdn-harness-standin": "v1 uuid=w-stale"})
    ds = Dataset(root)
    toy = ds.definition("toy_axpy")
    sol = Solution.from_json(toy_solution("good", GOOD), "good")
    results = evaluate(ds, toy, ds.workloads(toy), [sol], _opts(tmp_path))
    assert [(r.workload.uuid, r.trace.evaluation.status.value) for r in results] == [("w-new", "PASSED")]
    assert (root / "blob" / "toy" / "new.safetensors").exists()                 # synthesised, as before
    assert results[0].trace.evaluation.environment.libs["inputs"] == "stand-in"
    assert ("tensor 'x' (input 'x') is (5, 2) torch.float32; the definition wants (4, 2) torch.float32 (fix: it is "
            "a stand-in made for other axes: delete it to re-synthesise))") in capsys.readouterr().out


def test_parallel_preparation_skips_the_bad_workload_once(tmp_path, capsys):
    ds = Dataset(_root_with_a_bad_blob(tmp_path, _missing_key))
    toy = ds.definition("toy_axpy")
    sol = Solution.from_json(toy_solution("good", GOOD), "good")
    results = evaluate(ds, toy, ds.workloads(toy), [sol], _opts(tmp_path, prepare_jobs=2))
    assert [(r.workload.uuid, r.trace.evaluation.status.value) for r in results] == [("w-good", "PASSED")]
    out = capsys.readouterr().out
    assert out.count("workload w-bad skipped, no trace written: its baseline could not be built from its blobs") == 1
    assert "failed in its process" not in out


def test_a_reference_result_that_does_not_fit_the_outputs_skips_the_workload(tmp_path, capsys):
    root = make_toy_root(tmp_path / "toy")
    path = root / "definitions" / "toy" / "toy_axpy.json"
    d = json.loads(path.read_text())
    d["reference"] = ("def run(x, y, alpha):\n    z = x + alpha * y\n    return (z, z) if x.shape[0] == 4 else z\n")
    path.write_text(json.dumps(d))
    ds = Dataset(root)
    toy = ds.definition("toy_axpy")
    sol = Solution.from_json(toy_solution("good", GOOD), "good")
    results = evaluate(ds, toy, ds.workloads(toy), [sol], _opts(tmp_path))
    assert [(r.workload.uuid, r.trace.evaluation.status.value) for r in results] == [
        ("w-random", "PASSED"), ("w-standin", "PASSED")]                     # w-blob (n = 4) has no trace
    assert _traced(tmp_path) == ["w-random", "w-standin"]
    assert ("toy_axpy: workload w-blob skipped, no trace written: the reference's result does not fit the "
            "definition's outputs (RuntimeError: Tuple/list has 2 elements but 1 outputs expected)"
            ) in capsys.readouterr().out


def test_a_violated_constraint_still_stops_the_run(tmp_path):
    root = make_toy_root(tmp_path / "toy")
    _write_workloads(root, [{"uuid": "w-zero", "axes": {"n": 0}, "inputs": {
        "x": {"type": "random"}, "y": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.0}}}])
    ds = Dataset(root)
    toy = ds.definition("toy_axpy")
    sol = Solution.from_json(toy_solution("good", GOOD), "good")
    with pytest.raises(DataError, match=r"workload w-zero: constraint 'n > 0' is violated"):
        evaluate(ds, toy, ds.workloads(toy), [sol], _opts(tmp_path))


# --- what FIB's loader refuses ---

def _definition(**patch):
    obj = json.loads(json.dumps(TOY_DEF))
    for key, value in patch.items():
        obj[key] = value
    return obj


def _with_dtype(part, name, dtype):
    obj = _definition()
    obj[part][name]["dtype"] = dtype
    return obj


@pytest.mark.parametrize("obj,problem", [
    (_with_dtype("inputs", "x", "float64"), "field 'inputs.x.dtype' is 'float64', which is not in its DType enum"),
    (_with_dtype("outputs", "z", "float64"), "field 'outputs.z.dtype' is 'float64', which is not in its DType enum"),
    (_with_dtype("inputs", "y", "uint8"), "field 'inputs.y.dtype' is 'uint8', which is not in its DType enum"),
    (_definition(axes={"n": {"type": "var"}, "two": {"type": "const", "value": -2}}),
     "const axis 'axes.two.value' is negative (-2)"),
    (_definition(reference="import torch\nrun = lambda x, y, alpha: x + alpha * y\n"),
     "'reference' defines no top-level function 'run'"),
    (_definition(reference="class K:\n    def run(x, y, alpha):\n        return x + alpha * y\n"),
     "'reference' defines no top-level function 'run'"),
    (_definition(reference="if True:\n    def run(x, y, alpha):\n        return x + alpha * y\n"),
     "'reference' defines no top-level function 'run'"),
    (_definition(reference="async def run(x, y, alpha):\n    return x + alpha * y\n"),
     "'reference' defines no top-level function 'run'"),
    (_definition(reference="def main(x, y, alpha):\n    return x + alpha * y\n"),
     "'reference' defines no top-level function 'run'"),
    (_definition(reference="def run(x, y, alpha)\n    return x\n"), "'reference' is not valid Python ("),
])
def test_what_the_official_loader_refuses_in_a_definition_is_refused(obj, problem):
    with pytest.raises(DataError) as exc:
        Definition.from_json(obj, "defs/toy.json")
    text = str(exc.value)
    assert text.startswith(f"defs/toy.json: definition 'toy_axpy': {problem}")
    assert REFUSES in text


def test_a_decorated_top_level_run_is_accepted():
    obj = _definition(reference="def keep(f):\n    return f\n\n\n@keep\ndef run(x, y, alpha):\n"
                                "    return x + alpha * y\n")
    assert Definition.from_json(obj, "defs/toy.json").name == "toy_axpy"


def test_a_negative_workload_axis_is_refused():
    obj = {"uuid": "w-neg", "axes": {"n": -1}, "inputs": {}}
    with pytest.raises(DataError) as exc:
        Workload.from_json(obj, "w.jsonl:1")
    assert str(exc.value) == f"w.jsonl:1: workload w-neg: axis 'axes.n' is negative (-1); {REFUSES}"
    assert Workload.from_json({"uuid": "w-zero", "axes": {"n": 0}, "inputs": {}}, "w.jsonl:1").axes == {"n": 0}


def test_a_dataset_holding_one_refused_definition_does_not_load(tmp_path):
    root = make_toy_root(tmp_path / "toy")
    (root / "definitions" / "toy" / "other.json").write_text(json.dumps(
        _with_dtype("inputs", "x", "uint8") | {"name": "toy_other"}))
    with pytest.raises(DataError, match="definition 'toy_other': field 'inputs.x.dtype' is 'uint8'"):
        Dataset(root).definition("toy_axpy")


def test_a_dataset_holding_a_negative_axis_does_not_load(tmp_path):
    root = make_toy_root(tmp_path / "toy")
    p = root / "workloads" / "toy" / "toy_axpy.jsonl"
    lines = p.read_text().splitlines()
    last = json.loads(lines[-1])
    last["workload"]["axes"]["n"] = -8
    p.write_text("\n".join(lines[:-1] + [json.dumps(last)]) + "\n")
    with pytest.raises(DataError, match="toy_axpy.jsonl:3: workload w-standin: axis 'axes.n' is negative"):
        load_workloads(p)


# --- where this harness is stricter, it says so ---

def test_empty_outputs_are_refused_as_stricter():
    with pytest.raises(DataError) as exc:
        Definition.from_json(_definition(outputs={}), "defs/toy.json")
    assert str(exc.value) == ("defs/toy.json: definition 'toy_axpy': 'outputs' is empty; this harness refuses it, "
                              "stricter than FlashInfer-Bench's loader (which accepts it)")


@pytest.mark.parametrize("patch,problem", [
    ({"axes": {"m": 3}}, "axes do not match definition 'toy_axpy' (missing ['n'], unknown ['m'])"),
    ({"axes": {"n": 4, "m": 3}}, "axes do not match definition 'toy_axpy' (missing [], unknown ['m'])"),
    ({"inputs": {"x": {"type": "random"}, "y": {"type": "random"}}},
     "inputs do not match definition 'toy_axpy' (missing ['alpha'], unknown [])"),
    ({"inputs": {"x": {"type": "random"}, "y": {"type": "random"}, "alpha": {"type": "scalar", "value": 1},
                 "beta": {"type": "scalar", "value": 1}}},
     "inputs do not match definition 'toy_axpy' (missing [], unknown ['beta'])"),
])
def test_a_workload_that_does_not_match_its_definition_is_refused_as_stricter(tmp_path, patch, problem):
    root = make_toy_root(tmp_path / "toy")
    p = root / "workloads" / "toy" / "toy_axpy.jsonl"
    first = json.loads(p.read_text().splitlines()[0])
    first["workload"].update(patch)
    p.write_text(json.dumps(first) + "\n")
    ds = Dataset(root)
    with pytest.raises(DataError) as exc:
        ds.workloads(ds.definition("toy_axpy"))
    text = str(exc.value)
    assert text.startswith(f"{p}:1: workload w-random: {problem}; {STRICTER}: ")
