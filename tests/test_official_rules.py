"""FlashInfer-Bench's own loader, output and signature rules (DIFF.md items 6-8), applied to every solution the
harness loads, packs or evaluates: what FIB refuses is refused here with the same status, saying it is the
official rule; where the harness is stricter, the message says that."""
import json
import textwrap
from types import SimpleNamespace

import pytest
import torch

from harness.build.builders import check_signature
from harness.eval.correctness import normalize_outputs
from harness.data.dataset import Dataset
from harness.eval.options import EvalOptions
from harness.eval.loop import evaluate
from harness.data.jsonio import DataError
from harness.build.package import validate
from harness.eval.child import TimingConfig
from harness.data.solution import Solution
from harness.data.starter_kit import load_starter_kit
from tests.toy import make_toy_root, toy_solution

LOAD_FAILS = "; FlashInfer-Bench's loader refuses it, so the official dataset load would fail"
BODY = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"


def _set(path, value):
    def mutate(obj):
        *parents, key = path
        for p in parents:
            obj = obj[p]
        obj[key] = value
    return mutate


def _drop_target_hardware(obj):
    del obj["spec"]["target_hardware"]


@pytest.mark.parametrize("mutate,message", [
    (_set(["sources", 0, "content"], ""), "solution 's': source file 'main.py' is empty"),
    (_drop_target_hardware, "solution 's': 'spec.target_hardware' is missing or empty, got None"),
    (_set(["spec", "target_hardware"], []), "solution 's': 'spec.target_hardware' is missing or empty, got []"),
    (_set(["spec", "target_hardware"], "cuda"), "solution 's': 'spec.target_hardware' must be a list of strings, "
                                                "got 'cuda'"),
    (_set(["spec", "dependencies"], [""]), "solution 's': 'spec.dependencies' must be a list of non-empty strings, "
                                           "got ['']"),
    (_set(["name"], ""), "solution '': 'name' is empty"),
    (_set(["definition"], ""), "solution 's': 'definition' is empty"),
    (_set(["author"], ""), "solution 's': 'author' is empty"),
])
def test_what_the_official_loader_refuses_is_refused(mutate, message):
    obj = toy_solution("s", BODY)
    mutate(obj)
    with pytest.raises(DataError) as exc:
        Solution.from_json(obj, "sol.json")
    assert (exc.value.where, exc.value.message) == ("sol.json", message + LOAD_FAILS)


@pytest.mark.parametrize("mutate,message", [
    (_set(["sources", 0, "path"], "sub\\main.py"), "source path 'sub\\\\main.py' contains a backslash; this "
                                                   "harness refuses it, stricter than FlashInfer-Bench's loader "
                                                   "(which accepts it)"),
    (_set(["spec", "destination_passing_style"], "false"),
     "solution 's': 'spec.destination_passing_style' must be true or false, got 'false'; this harness refuses "
     "anything else, stricter than FlashInfer-Bench's loader (which coerces 0/1 and strings like \"false\")"),
    (_set(["spec", "entry_point"], "main.py::"), "solution 's': 'spec.entry_point' 'main.py::' names no symbol; "
                                                 "this harness refuses it at load, stricter than FlashInfer-Bench, "
                                                 "whose build fails on it (COMPILE_ERROR)"),
])
def test_where_the_harness_is_stricter_it_says_so(mutate, message):
    obj = toy_solution("s", BODY)
    mutate(obj)
    with pytest.raises(DataError) as exc:
        Solution.from_json(obj, "sol.json")
    assert exc.value.message == message


def test_a_starter_kit_goes_through_the_same_rules(tmp_path):
    kit = tmp_path / "kit"
    src = kit / "solution" / "python"
    src.mkdir(parents=True)
    (kit / "config.toml").write_text('[solution]\nname = "k"\ndefinition = "toy_axpy"\nauthor = "a"\n'
                                     '[build]\nlanguage = "python"\nentry_point = "main.py::run"\n')
    (src / "main.py").write_text(BODY)
    # no target_hardware in config.toml: ["cuda"], which the official packer (scripts/pack_solution.py) writes
    assert load_starter_kit(kit).spec.target_hardware == ["cuda"]
    (src / "__init__.py").write_text("")  # an empty file: the official packer packs it, and its load fails
    with pytest.raises(DataError) as exc:
        load_starter_kit(kit)
    assert (exc.value.where, exc.value.message) == (
        str(kit / "config.toml"), "solution 'k': source file '__init__.py' is empty" + LOAD_FAILS)


def test_value_returning_outputs_as_officially():
    a, b = torch.zeros(2), torch.ones(2)
    assert normalize_outputs((a, b), ["o1", "o2"]) == [a, b]
    assert normalize_outputs([a], ["o"]) == [a]
    assert normalize_outputs(True, ["o"], [torch.bool])[0].dtype == torch.bool
    with pytest.raises(RuntimeError) as exc:
        normalize_outputs({"o1": a, "o2": b}, ["o1", "o2"])
    assert str(exc.value) == ("returned a dict (keys ['o1', 'o2']); the official evaluator accepts a tensor or a "
                              "tuple/list of the 2 outputs ['o1', 'o2'] in order, so it is a RUNTIME_ERROR")
    with pytest.raises(RuntimeError, match="returned a dict"):
        normalize_outputs({"o": a}, ["o"])  # one output: FIB's torch.tensor(dict) fails too
    with pytest.raises(RuntimeError) as exc:
        normalize_outputs((a, None), ["o1", "o2"])
    assert str(exc.value) == ("output 'o2' is None; the official evaluator makes each returned value a tensor "
                              "(torch.tensor), which fails on None, so it is a RUNTIME_ERROR")


TWO_OUT = "Value-returning style callable with 2 outputs must "
# (source of `run`, number of outputs, FIB's message (before its ", got ..." tail) or None)
ANNOTATIONS = [
    ("def run(x) -> tuple[torch.Tensor]: ...", 2, TWO_OUT + "return a 2-element tuple"),
    ("def run(x) -> typing.Tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...", 2,
     TWO_OUT + "return a 2-element tuple"),
    ("def run(x) -> None: ...", 2, TWO_OUT + "not return None"),
    ("def run(x) -> None: ...", 1, "Value-returning style callable with 1 outputs must not return None"),
    ("def run(x) -> torch.Tensor: ...", 2,
     "Value-returning style callable returning non-tuple must only have one output, got 2"),
    ("def run(x) -> tuple[torch.Tensor, torch.Tensor]: ...", 1,
     "Value-returning style callable with 1 outputs must return a 1-element tuple"),
    # with postponed annotations inspect.signature gives a string, which FIB's check takes as "not a tuple"
    ("from __future__ import annotations\ndef run(x) -> tuple[torch.Tensor, torch.Tensor]: ...", 2,
     "Value-returning style callable returning non-tuple must only have one output, got 2"),
    ("def run(x) -> typing.Tuple[torch.Tensor, torch.Tensor]: ...", 2, None),
    ("def run(x) -> torch.Tensor: ...", 1, None),
    ("def run(x): ...", 2, None),
]


def _full(source):
    return source.replace("def run", "import typing\nimport torch\n\n\ndef run", 1)  # after any __future__


def _module(source):
    ns = {}
    exec(compile(_full(source), "<test>", "exec"), ns)
    return ns["run"]


@pytest.mark.parametrize("source,n_out,message", ANNOTATIONS)
def test_return_annotation_at_build(source, n_out, message):
    problem = check_signature(_module(source), 1, n_out, dps=False)
    if message is None:
        assert problem is None
    else:
        assert problem.startswith(message)
    assert check_signature(_module(source), 0, 1, dps=True) is None  # DPS: the annotation is not read


def test_build_message_is_fibs():
    assert check_signature(_module("def run(x) -> tuple[torch.Tensor]: ..."), 1, 2, dps=False) == \
        TWO_OUT + "return a 2-element tuple, got tuple[torch.Tensor]"


@pytest.mark.parametrize("source,n_out,message", ANNOTATIONS)
def test_return_annotation_when_packing(source, n_out, message):
    sol = Solution.from_json(toy_solution("s", _full(source), dps=False), "s.json")
    definition = SimpleNamespace(inputs={"x": None}, outputs={f"o{i}": None for i in range(n_out)})
    if message is None:
        validate(sol, definition, "kit")
        return
    with pytest.raises(DataError) as exc:
        validate(sol, definition, "kit")
    assert exc.value.where == "kit/main.py" and exc.value.message.startswith(message)
    assert exc.value.message.endswith(" (the official build-time check; it gives COMPILE_ERROR)")


def test_package_names_the_annotation_as_written():
    sol = Solution.from_json(toy_solution("s", "import torch\ndef run(x) -> tuple[torch.Tensor]: ...\n", dps=False),
                             "s.json")
    with pytest.raises(DataError) as exc:
        validate(sol, SimpleNamespace(inputs={"x": None}, outputs={"a": None, "b": None}), "kit")
    assert exc.value.message == (TWO_OUT + "return a 2-element tuple, got tuple[torch.Tensor] (the official "
                                           "build-time check; it gives COMPILE_ERROR)")


# End to end on the toy definition (3 inputs, 1 output z), as `gdn-harness eval` runs them.
E2E = {
    "returns_dict": ("def run(x, y, alpha):\n    return {'z': x + alpha * y}\n", "RUNTIME_ERROR", "returned a dict"),
    "returns_none": ("def run(x, y, alpha):\n    return (None,)\n", "RUNTIME_ERROR", "output 'z' is None"),
    "annotated_none": ("def run(x, y, alpha) -> None:\n    return x + alpha * y\n", "COMPILE_ERROR",
                       "Value-returning style callable with 1 outputs must not return None"),
    "annotated_pair": ("import torch\ndef run(x, y, alpha) -> tuple[torch.Tensor, torch.Tensor]:\n"
                       "    return x + alpha * y\n", "COMPILE_ERROR",
                       "Value-returning style callable with 1 outputs must return a 1-element tuple"),
    "annotated_ok": ("import torch\ndef run(x, y, alpha) -> torch.Tensor:\n    return x + alpha * y\n", "PASSED", ""),
}


def test_statuses_end_to_end(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    definition = ds.definition("toy_axpy")
    workloads = [w for w in ds.workloads(definition) if w.uuid == "w-random"]
    sols = [Solution.from_json(toy_solution(name, textwrap.dedent(body), dps=False), name)
            for name, (body, _, _) in E2E.items()]
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), isolation="process",
                       timeout=60, show_progress=False, prestart=0, profile_baseline=False,
                       reference_cache=tmp_path / "ref.json")
    results = {r.solution.name: r.trace.evaluation for r in evaluate(ds, definition, workloads, sols, opts)}
    for name, (_, status, needle) in E2E.items():
        assert results[name].status.value == status, (name, results[name].log[-2000:])
        assert needle in results[name].log, (name, results[name].log[-2000:])


def test_a_workload_whose_reference_fails_is_skipped_without_traces(tmp_path, capsys):
    import json
    root = make_toy_root(tmp_path / "toy")
    path = root / "definitions" / "toy" / "toy_axpy.json"
    d = json.loads(path.read_text())
    d["reference"] = ("import torch\n\ndef run(x, y, alpha):\n    if x.shape[0] == 4:\n"
                      "        raise RuntimeError('no reference for n = 4')\n    return x + alpha * y\n")
    path.write_text(json.dumps(d))
    ds = Dataset(root)
    definition = ds.definition("toy_axpy")
    sol = Solution.from_json(toy_solution("good", BODY), "good")
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), show_progress=False,
                       profile_baseline=False)
    results = evaluate(ds, definition, ds.workloads(definition), [sol], opts)
    assert [(r.workload.uuid, r.trace.evaluation.status.value) for r in results] == [
        ("w-random", "PASSED"), ("w-standin", "PASSED")]        # w-blob (n = 4) has no trace
    traced = [json.loads(line)["workload"]["uuid"]
              for line in (tmp_path / "out" / "traces" / "tester" / "toy" / "toy_axpy.jsonl").read_text().splitlines()]
    assert traced == ["w-random", "w-standin"]
    assert ("workload w-blob skipped, no trace written: the reference failed on its inputs (RuntimeError: no "
            "reference for n = 4)") in capsys.readouterr().out


def test_solutions_run_in_flashinfer_benchs_order_within_a_workload(tmp_path):
    # FIB runs a workload's solutions in the sorted order of solutions/<author>/<op_type>/<definition>/<name>.json:
    # by author, then file name, so "a-b.json" before "a.json"; the results keep the order given
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    definition = ds.definition("toy_axpy")
    workloads = [w for w in ds.workloads(definition) if w.uuid in ("w-random", "w-blob")]
    body = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"
    given = [("zed", "a"), ("tester", "a"), ("tester", "b"), ("tester", "a-b")]
    sols = []
    for author, name in given:
        obj = toy_solution(name if author == "tester" else "z-" + name, body)
        obj["author"] = author
        sols.append(Solution.from_json(obj, obj["name"]))
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), isolation="none",
                       show_progress=False, profile_baseline=False, reference_cache=tmp_path / "ref.json")
    results = evaluate(ds, definition, workloads, sols, opts)
    assert [r.solution.name for r in results] == ["z-a", "a", "b", "a-b"] * 2          # as given
    ran = [json.loads(line)["solution"] for line in (tmp_path / "out" / "harness" / "toy_axpy.jsonl").open()]
    assert ran == ["a-b", "a", "b", "z-a"] * 2                                        # as FlashInfer-Bench runs them


def test_a_tilelang_solution_is_a_printed_difference_and_a_compile_error(tmp_path, capsys):
    # FlashInfer-Bench builds TileLang where tilelang is importable; the harness has no such builder
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    definition = ds.definition("toy_axpy")
    sol = Solution.from_json(toy_solution("tl", BODY, language="tilelang"), "tl")
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), show_progress=False,
                       profile_baseline=False)
    results = evaluate(ds, definition, ds.workloads(definition)[:1], [sol], opts)
    assert [r.trace.evaluation.status.value for r in results] == ["COMPILE_ERROR"]
    assert "tl: a TileLang solution gets COMPILE_ERROR here (deliberate difference" in capsys.readouterr().out
