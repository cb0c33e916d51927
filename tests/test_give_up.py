"""--give-up-after and --entry-budget (the public run): a solution that timed out on N workloads is not run on
workloads with no smaller inputs, and one whose pairs spent the budget in the timer is not run on the rest; those
pairs get no trace, an extras line with the reason, and the leaderboard lists them."""
import json
from dataclasses import replace

from harness.data.dataset import Dataset, read_traces, trace_path
from harness.data.solution import Solution
from harness.eval.child import TimingConfig
from harness.eval.give_up import GiveUpRule, input_elements
from harness.eval.loop import evaluate
from harness.eval.options import EvalOptions, differences
from harness.public.board import given_up
from tests.toy import make_toy_root, toy_solution

GOOD = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"
SLEEPS = "import time\ndef run(x, y, alpha, z):\n    time.sleep(60)\n"
SLOW = "import time\ndef run(x, y, alpha, z):\n    time.sleep(0.4)\n    z.copy_(x + alpha * y)\n"


def test_input_size_counts_every_input_element():
    ds = Dataset()
    decode = ds.definition("gdn_decode_qk4_v8_d128_k_last")
    w = next(w for w in ds.workloads(decode) if w.axes["batch_size"] == 1)
    # q, k [1, 1, 4, 128]; v [1, 1, 8, 128]; state [1, 8, 128, 128]; A_log, dt_bias [8]; a, b [1, 1, 8]; scale
    assert input_elements(decode, w) == 2 * 512 + 1024 + 8 * 128 * 128 + 2 * 8 + 2 * 8 + 1


def _toy_run(tmp_path, other, body, timeout, rule):
    """The toy's workloads smallest first, a good solution and `other`, evaluated under `rule`; returns the
    evaluate() of a later pass too (same options) and {(solution, workload): status or the not-run reason}."""
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    toy = ds.definition("toy_axpy")
    by_size = sorted(ds.workloads(toy), key=lambda w: input_elements(toy, w))
    assert [w.uuid for w in by_size] == ["w-blob", "w-standin", "w-random"]   # n = 4, 8, 16: 4n + 1 elements
    sols = [Solution.from_json(toy_solution(n, b), n) for n, b in (("good", GOOD), (other, body))]
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timeout=timeout, timing=TimingConfig(0, 1, 1),
                       show_progress=False, profile_baseline=False, isolation="worker", resume=True, give_up=rule)
    results = evaluate(ds, toy, by_size, sols, opts)
    got = {(r.solution.name, r.workload.uuid): r.trace.evaluation.status.value if r.trace else r.not_run
           for r in results}
    return (lambda o=opts: evaluate(ds, toy, by_size, sols, o)), opts, got


def test_a_solution_that_times_out_is_not_run_on_larger_workloads(tmp_path):
    again_run, opts, got = _toy_run(tmp_path, "sleeps", SLEEPS, 3, GiveUpRule(after=1))
    out = opts.out_dir
    assert any("--give-up-after" in n for n in differences(opts))
    assert not any("--give-up-after" in n for n in differences(replace(opts, give_up=None)))
    why = "not run: it timed out on 1 workload(s) with no larger inputs (--give-up-after 1)"
    assert got == {("good", "w-blob"): "PASSED", ("good", "w-standin"): "PASSED", ("good", "w-random"): "PASSED",
                   ("sleeps", "w-blob"): "TIMEOUT", ("sleeps", "w-standin"): why, ("sleeps", "w-random"): why}
    traces = read_traces(trace_path(out, "tester", "toy", "toy_axpy"))
    assert sorted((t.solution, t.workload.uuid) for t in traces if t.solution == "sleeps") == [("sleeps", "w-blob")]
    extras = [json.loads(x) for x in (out / "harness" / "toy_axpy.jsonl").read_text().splitlines()]
    assert sorted(e["workload"] for e in extras if e["status"] == "NOT_RUN") == ["w-random", "w-standin"]
    assert given_up(out, "toy_axpy") == {"sleeps": {why: 2}}

    # resumed: the kept TIMEOUT trace still counts, so nothing of the sleeper runs again
    again = again_run()
    assert [r.not_run for r in again if r.not_run] == [why, why]
    assert all(r.skipped for r in again)
    assert given_up(out, "toy_axpy") == {"sleeps": {why: 2}}   # said again on resume, counted once


def test_a_solution_that_spent_its_budget_is_not_run_on_the_rest(tmp_path):
    # one timed call per pair: the slow one's first pair spends >= 0.4 s in the timer, the good one's far less
    again_run, opts, got = _toy_run(tmp_path, "slow", SLOW, 60, GiveUpRule(budget_s=0.3))
    out = opts.out_dir
    assert any("--entry-budget" in n for n in differences(opts))
    why = "not run: its pairs had spent 0.3 s or more in the timer (--entry-budget)"
    assert got == {("good", "w-blob"): "PASSED", ("good", "w-standin"): "PASSED", ("good", "w-random"): "PASSED",
                   ("slow", "w-blob"): "PASSED", ("slow", "w-standin"): why, ("slow", "w-random"): why}
    assert given_up(out, "toy_axpy") == {"slow": {why: 2}}

    # resumed: the kept pair's seconds still count; with a larger budget the rest runs
    again = again_run()
    assert [r.not_run for r in again if r.not_run] == [why, why]
    more = again_run(replace(opts, give_up=GiveUpRule(budget_s=600)))
    assert not any(r.not_run for r in more)
    assert given_up(out, "toy_axpy") == {}

    # the whole run again (--no-resume) with the small budget: the earlier traces of the two pairs go to stale/ and
    # the pairs have none now, so they are listed as given up on again
    fresh = again_run(replace(opts, resume=False))
    assert [r.not_run for r in fresh if r.not_run] == [why, why]
    traces = read_traces(trace_path(out, "tester", "toy", "toy_axpy"))
    assert {t.workload.uuid for t in traces if t.solution == "slow"} == {"w-blob"}
    assert given_up(out, "toy_axpy") == {"slow": {why: 2}}


def test_the_leaderboard_lists_the_pairs_given_up_on(tmp_path):
    from harness.public.board import _append_not_run
    md = tmp_path / "board.md"
    md.write_text("# board\n")
    _append_not_run(md, [], {"slow-entry": {"not run: it timed out on 2 workload(s) with no larger inputs "
                                            "(--give-up-after 2)": 40,
                                            "not run: its pairs had spent 120 s or more in the timer "
                                            "(--entry-budget)": 3}})
    text = md.read_text()
    assert "## Not run here\n\n- none" in text
    assert "## Pairs given up on (no trace)\n\n- slow-entry: 40 workload(s) not run: it timed out on 2" in text
    assert "\n- slow-entry: 3 workload(s) not run: its pairs had spent 120 s or more" in text
