"""Every official status, produced end to end through isolated child processes on the toy dataset."""
import json
import math

import pytest

from harness.eval.correctness import Tolerance
from harness.data.dataset import Dataset, read_traces, trace_path
from harness.eval.options import EvalOptions
from harness.eval.loop import evaluate
from harness.eval.child import TimingConfig
from harness.data.solution import Solution
from tests.toy import make_toy_root, toy_solution

GOOD = """
def run(x, y, alpha, z):
    z.copy_(x + alpha * y)
"""
CASES = {
    "good": (GOOD, "PASSED", {}),
    "value_returning": ("def run(x, y, alpha):\n    return x + alpha * y\n", "PASSED", {"dps": False}),
    "wrong_values": ("def run(x, y, alpha, z):\n    z.copy_(x + alpha * y + 0.5)\n", "INCORRECT_NUMERICAL", {}),
    "writes_nan": ("def run(x, y, alpha, z):\n    z.fill_(float('nan'))\n", "INCORRECT_NUMERICAL", {}),
    "writes_inf": ("def run(x, y, alpha, z):\n    z.fill_(float('inf'))\n", "INCORRECT_NUMERICAL", {}),
    "wrong_shape": ("def run(x, y, alpha):\n    return (x + alpha * y)[:1]\n", "INCORRECT_SHAPE", {"dps": False}),
    "wrong_dtype": ("def run(x, y, alpha):\n    return (x + alpha * y).double()\n", "INCORRECT_DTYPE",
                    {"dps": False}),
    "raises_at_call": ("def run(x, y, alpha, z):\n    raise ValueError('boom')\n", "RUNTIME_ERROR", {}),
    "raises_at_import": ("raise ImportError('nope')\ndef run(x, y, alpha, z):\n    pass\n", "COMPILE_ERROR", {}),
    "syntax_error": ("def run(x, y, alpha, z)\n    pass\n", "COMPILE_ERROR", {}),
    "wrong_signature": ("def run(x, y, z):\n    pass\n", "COMPILE_ERROR", {}),
    "exits_hard": ("import os\ndef run(x, y, alpha, z):\n    os._exit(3)\n", "RUNTIME_ERROR", {}),
    "segfaults": ("import ctypes\ndef run(x, y, alpha, z):\n    ctypes.string_at(0)\n", "RUNTIME_ERROR", {}),
    "sleeps_past_timeout": ("import time\ndef run(x, y, alpha, z):\n    time.sleep(60)\n", "TIMEOUT", {}),
}


@pytest.fixture(scope="module")
def statuses(tmp_path_factory):
    root = make_toy_root(tmp_path_factory.mktemp("toy"))
    ds = Dataset(root)
    definition = ds.definition("toy_axpy")
    workloads = [w for w in ds.workloads(definition) if w.uuid == "w-random"]
    sols = [Solution.from_json(toy_solution(name, body, **kw), name) for name, (body, _, kw) in CASES.items()]
    out = tmp_path_factory.mktemp("out")
    opts = EvalOptions(device="cpu", out_dir=out, timeout=8, timing=TimingConfig(0, 2, 3), show_progress=False)
    results = evaluate(ds, definition, workloads, sols, opts)
    return {r.solution.name: r for r in results}, out, definition


@pytest.mark.parametrize("name", list(CASES))
def test_status(statuses, name):
    results, _, _ = statuses
    ev = results[name].trace.evaluation
    assert ev.status.value == CASES[name][1], ev.log[-2000:]


def test_schema_rule_per_status(statuses):
    results, _, _ = statuses
    for r in results.values():
        ev = r.trace.evaluation
        assert (ev.correctness is not None) == (ev.status.value in ("PASSED", "INCORRECT_NUMERICAL"))
        assert (ev.performance is not None) == (ev.status.value == "PASSED")


def test_messages_are_the_official_ones(statuses):
    results, _, _ = statuses
    assert "Destination-passing style callable: expected 4 positional parameters" in \
        results["wrong_signature"].trace.evaluation.log
    assert "Build error:" in results["raises_at_import"].trace.evaluation.log
    assert "ValueError: boom" in results["raises_at_call"].trace.evaluation.log
    assert "Evaluation timeout after 8 seconds for solution sleeps_past_timeout" in \
        results["sleeps_past_timeout"].trace.evaluation.log
    assert "Worker process failed unexpectedly" in results["segfaults"].trace.evaluation.log


def test_inf_and_nan_errors(statuses):
    results, _, _ = statuses
    c_inf = results["writes_inf"].trace.evaluation.correctness
    c_nan = results["writes_nan"].trace.evaluation.correctness
    assert math.isinf(c_inf.max_absolute_error) and math.isnan(c_nan.max_absolute_error)
    assert results["wrong_values"].trace.evaluation.correctness.max_absolute_error == pytest.approx(0.5, abs=1e-6)


def test_traces_on_disk_are_official_jsonl(statuses):
    results, out, definition = statuses
    path = trace_path(out, "tester", "toy", "toy_axpy")
    assert path.exists()
    lines = path.read_text().splitlines()
    assert len(lines) == len(CASES)
    nan_line = next(json.loads(x) for x in lines if json.loads(x)["solution"] == "writes_nan")
    assert nan_line["evaluation"]["correctness"]["max_absolute_error"] == "NaN"
    inf_line = next(json.loads(x) for x in lines if json.loads(x)["solution"] == "writes_inf")
    assert inf_line["evaluation"]["correctness"]["max_relative_error"] == "Infinity"
    assert set(json.loads(lines[0])) == {"definition", "workload", "solution", "evaluation"}
    assert set(json.loads(lines[0])["evaluation"]) == {"status", "environment", "timestamp", "log", "correctness",
                                                       "performance"}
    assert len(read_traces(path)) == len(CASES)


def test_tolerance_override_turns_a_failure_into_a_pass(tmp_path):
    root = make_toy_root(tmp_path / "toy")
    ds = Dataset(root)
    definition = ds.definition("toy_axpy")
    w = [w for w in ds.workloads(definition) if w.uuid == "w-blob"]
    sol = Solution.from_json(toy_solution("off", CASES["wrong_values"][0]), "off")
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "o", timing=TimingConfig(0, 1, 1), show_progress=False,
                       tolerance=Tolerance(atol=0.6, rtol=0.0), isolation="worker")
    (res,) = evaluate(ds, definition, w, [sol], opts)
    assert res.trace.evaluation.status.value == "PASSED"


def test_pool_of_prestarted_children_loses_nothing(tmp_path):
    import multiprocessing

    root = make_toy_root(tmp_path / "toy")
    ds = Dataset(root)
    definition = ds.definition("toy_axpy")
    sols = [Solution.from_json(toy_solution(n, CASES[n][0], **CASES[n][2]), n)
            for n in ("good", "exits_hard", "wrong_values", "value_returning")]
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "o", timeout=20, timing=TimingConfig(0, 1, 1),
                       show_progress=False, prestart=3)
    results = evaluate(ds, definition, ds.workloads(definition), sols, opts)
    assert [r.trace.evaluation.status.value for r in results] == \
        ["PASSED", "RUNTIME_ERROR", "INCORRECT_NUMERICAL", "PASSED"] * 3
    assert not multiprocessing.active_children()  # every spare is shut down


def test_worker_mode_keeps_one_child_per_solution_and_replaces_a_crashed_one(tmp_path):
    root = make_toy_root(tmp_path / "toy")
    ds = Dataset(root)
    definition = ds.definition("toy_axpy")
    log = tmp_path / "pids.txt"
    body = ("import os\ndef run(x, y, alpha, z):\n"
            f"    open({str(log)!r}, 'a').write(f'{{NAME}} {{os.getpid()}}\\n')\n"
            "    if NAME == 'crashy' and x.shape[0] == 4:\n        os._exit(3)\n"
            "    z.copy_(x + alpha * y)\n")
    sols = [Solution.from_json(toy_solution(n, f"NAME = {n!r}\n" + body), n) for n in ("a", "b", "crashy")]
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "o", timing=TimingConfig(0, 1, 1), show_progress=False,
                       isolation="worker")
    results = evaluate(ds, definition, ds.workloads(definition), sols, opts)
    crashed = {r.workload.uuid for r in results if r.trace.evaluation.status.value == "RUNTIME_ERROR"}
    assert crashed == {"w-blob"}  # the n=4 workload, and only for crashy
    pids = {}
    for name, pid in (line.split() for line in log.read_text().splitlines()):
        pids.setdefault(name, set()).add(pid)
    assert len(pids["a"]) == 1 and len(pids["b"]) == 1 and pids["a"] != pids["b"]
    assert len(pids["crashy"]) == 2  # a fresh child after the crash


TRITON_AXPY = """
import triton
import triton.language as tl


@triton.jit
def _axpy(x, y, z, alpha, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(z + offs, tl.load(x + offs, mask=m) + alpha * tl.load(y + offs, mask=m), mask=m)


def run(x, y, alpha, z):
    _axpy[(1,)](x, y, z, float(alpha), x.numel(), BLOCK=64)
"""


@pytest.mark.parametrize("isolation", ["process", "worker", "none"])
def test_triton_solution_runs_on_cpu_without_the_user_setting_the_interpreter(tmp_path, monkeypatch, isolation):
    """`--device cpu` promises Triton kernels through the interpreter: the harness sets the switch itself."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    root = make_toy_root(tmp_path / "toy")
    ds = Dataset(root)
    definition = ds.definition("toy_axpy")
    sol = Solution.from_json(toy_solution("tri", TRITON_AXPY, language="triton"), "tri")
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "o", timing=TimingConfig(0, 1, 1), show_progress=False,
                       isolation=isolation)
    results = evaluate(ds, definition, ds.workloads(definition), [sol], opts)
    assert [r.trace.evaluation.status.value for r in results] == ["PASSED"] * 3, results[0].trace.evaluation.log[-800:]
