"""The adversarial corpus (tests/adversarial/*.json, official Solution format): whatever a solution does,
the harness keeps running, gives the expected verdict, loses no other result, and warns as expected."""
import json
from pathlib import Path

import pytest

from harness.data.dataset import Dataset, read_traces, trace_path
from harness.eval.options import EvalOptions
from harness.eval.loop import evaluate
from harness.eval.child import TimingConfig
from harness.data.solution import Solution
from tests.toy import make_toy_root

CORPUS = Path(__file__).resolve().parent / "adversarial"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())


def _run(tmp, device, timeout):
    root = make_toy_root(tmp / "toy")
    ds = Dataset(root)
    definition = ds.definition("toy_axpy")
    workloads = [w for w in ds.workloads(definition) if w.uuid == "w-random"]
    sols = [Solution.load(CORPUS / f"{name}.json") for name in EXPECTED]
    opts = EvalOptions(device=device, out_dir=tmp / "out", timeout=timeout, timing=TimingConfig(1, 5, 3),
                       show_progress=False)
    results = evaluate(ds, definition, workloads, sols, opts)
    on_disk = read_traces(trace_path(tmp / "out", "adversary", "toy", "toy_axpy"))
    return {r.solution.name: r for r in results}, on_disk


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("adv"), "cpu", 8)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_cpu_verdict_and_warning(cpu_run, name):
    results, _ = cpu_run
    r = results[name]
    assert r.trace.evaluation.status.value == EXPECTED[name]["cpu"], r.trace.evaluation.log[-1500:]
    want = EXPECTED[name]["cpu_warning"]
    if want:
        assert any(want in w for w in r.warnings), r.warnings
        assert want in r.trace.evaluation.log
    else:
        assert not any("memoized" in w or "modified" in w for w in r.warnings), r.warnings


def test_nothing_lost_and_log_truncated(cpu_run):
    results, on_disk = cpu_run
    assert len(on_disk) == len(EXPECTED) and {t.solution for t in on_disk} == set(EXPECTED)
    log = results["prints_megabytes"].trace.evaluation.log
    assert log.rstrip().endswith("[log truncated]") or "[log truncated]" in log
    assert len(log) < 5 * 1024 * 1024 + 1000


@pytest.mark.gpu
def test_gpu_corpus(tmp_path):
    results, on_disk = _run(tmp_path, "cuda", 30)
    assert len(on_disk) == len(EXPECTED)
    wrong = {}
    print(f"\n{'case':<32} {'expected':<20} {'seen':<20} warning expected / seen")  # for the closing note (-s)
    for name, exp in EXPECTED.items():
        r = results[name]
        seen = r.trace.evaluation.status.value
        ok = seen == exp["gpu"]
        if exp["gpu_warning"]:
            ok &= any(exp["gpu_warning"] in w for w in r.warnings)
        print(f"{name:<32} {exp['gpu']:<20} {seen:<20} {exp['gpu_warning'] or '-'} / "
              f"{'; '.join(w[:60] for w in r.warnings) or '-'}")
        if not ok:
            wrong[name] = (seen, r.warnings, r.trace.evaluation.log[-400:])
    assert not wrong, wrong


SPIN_COMPILE = r"""
import importlib.util, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
spec = importlib.util.spec_from_file_location("spin", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
ck = triton.compile(ASTSource(mod._spin, {"flag": "*i32", "p": "*fp32"}, constexprs={}),
                    target=GPUTarget("cuda", 90, 32))
ptx = ck.asm["ptx"]
body = ptx[ptx.index(".entry"):]
print("atom" in body, "bra" in body)
"""


def test_gpu_infinite_loop_case_really_spins(tmp_path):
    """The GPU infinite-loop case must keep its loop: one without side effects is deleted by the compiler
    (an earlier version of the case returned at once on the H200). Offline compile for sm_90, no GPU."""
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys

    source = tmp_path / "main.py"
    source.write_text(Solution.load(CORPUS / "gpu_infinite_loop.json").sources[0].content)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    out = subprocess.run([sys.executable, "-c", SPIN_COMPILE, str(source)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["True", "True"], out.stdout
