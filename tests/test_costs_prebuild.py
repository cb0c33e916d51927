"""The run's own cost report (harness/eval/costs.py) on hand-worked pairs, and the side-by-side build of native
solutions before the loop (harness/build/prebuild.py) on a C++ solution that does not compile."""
import json

from harness.build.prebuild import Prebuild, native
from harness.data.dataset import Dataset
from harness.data.solution import Solution
from harness.eval.child import TimingConfig
from harness.eval.costs import PairCost, calls_per_pair, summarize
from harness.eval.loop import evaluate
from harness.eval.options import EvalOptions
from tests.toy import make_toy_root, toy_solution


def test_calls_per_pair_counts_the_timer_the_checks_and_the_probes():
    # per trial: 1 + 5 estimating calls, 10 dry runs, 50 timed, 50 event-timed = 116; x3 = 348; + 3 checks + 3 after
    assert calls_per_pair(TimingConfig(10, 50, 3), 3) == 354
    assert calls_per_pair(TimingConfig(1, 5, 3), 3) == 3 * (6 + 1 + 10) + 3 + 3


def test_summary_subtracts_the_solutions_gpu_time_from_the_wall_time():
    costs = [PairCost(0.30, {"build_s": 0.01, "timing_s": 0.2}, 0.01, 100),   # 1 ms of calls: overhead 0.299
             PairCost(0.50, {"build_s": 0.03, "timing_s": 0.4}, 1.0, 100),    # 0.1 s of calls: overhead 0.4
             PairCost(2.00, {}, None, 100)]                                    # crashed: no latency, no phases
    out = summarize(costs)
    assert out["pairs"] == 3 and out["wall_s_total"] == 2.8 and out["wall_s_median"] == 0.5
    assert out["overhead_s_total"] == round(0.299 + 0.4, 3) and out["overhead_s_median"] == round((0.299 + 0.4) / 2, 4)
    assert out["build_s_median"] == 0.02 and out["timing_s_median"] == 0.3 and "load_s_median" not in out
    assert summarize([]) == {"pairs": 0}


BROKEN_CPP = {"path": "axpy.cpp", "content": "int run( { this is not C++\n"}


def _broken_native():
    sol = toy_solution("broken-cpp", "", language="cpp", entry="axpy.cpp::run")
    sol["sources"] = [BROKEN_CPP]
    sol["spec"]["binding"] = "tvm-ffi"
    return Solution.from_json(sol, "broken-cpp")


def test_prebuild_builds_only_native_solutions_and_reports_failures():
    python = Solution.from_json(toy_solution("py", "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"), "py")
    broken = _broken_native()
    assert native([python, broken]) == [broken]
    assert Prebuild([python], 2).wait() == {}
    (name, (error, seconds)), = Prebuild([python, broken], 2).wait().items()
    assert name == "broken-cpp" and error and seconds > 0


def test_a_native_build_failing_beforehand_is_built_again_by_its_child(tmp_path, capsys):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    d = ds.definition("toy_axpy")
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), show_progress=False,
                       profile_baseline=False)
    stats = {}
    (r,) = evaluate(ds, d, ds.workloads(d)[:1], [_broken_native()], opts, stats)
    assert r.trace.evaluation.status.value == "COMPILE_ERROR"
    assert "axpy.cpp" in r.trace.evaluation.log           # the child's own build log, as officially
    out = capsys.readouterr().out
    assert "1 native solution(s) built side by side" in out and "1 failed and are built again" in out
    assert set(stats["build_s"]) == {"broken-cpp"} and stats["per_pair"]["pairs"] == 1
    extras = [json.loads(line) for line in (tmp_path / "out" / "harness" / "toy_axpy.jsonl").read_text().splitlines()]
    assert [list(e["child_phases"]) for e in extras if e.get("solution") == "broken-cpp"] == [["build_s"]]
