"""Resume keeps a trace only for the same solution content, hardware and settings, and a kept trace still counts:
it is shown, a kept failure is listed with its reason and makes the exit status 1 (a toy dataset, on the CPU)."""
import json
import platform

import pytest

from harness.cli import main
from tests.toy import make_toy_root, toy_solution

GOOD = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"
# off by one part in a thousand: PASSED at the official 1e-2, INCORRECT_NUMERICAL at 1e-6
CLOSE = "def run(x, y, alpha, z):\n    z.copy_((x + alpha * y) * 1.001)\n"


@pytest.fixture
def toy(tmp_path):
    root = make_toy_root(tmp_path / "toy")

    def write(name, body):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(toy_solution(name, body)))
        return str(path)

    def run(*extra):
        return main(["eval", "--dataset", str(root), "--device", "cpu", "--quiet", "--no-reference-output-cache",
                     "--out", str(tmp_path / "out"), *extra])
    return tmp_path, write, run


def _traces(tmp):
    return [json.loads(x) for x in (tmp / "out" / "traces" / "tester" / "toy" / "toy_axpy.jsonl").read_text()
            .splitlines()]


def _stale(tmp):
    return [json.loads(x) for x in (tmp / "out" / "stale" / "tester" / "toy" / "toy_axpy.jsonl").read_text()
            .splitlines()]


def test_other_tolerances_evaluate_again_and_the_first_traces_move_to_stale(toy, capsys):
    tmp, write, run = toy
    sol = write("close", CLOSE)
    assert run("--solution", sol) == 0
    first = _traces(tmp)
    assert {t["evaluation"]["status"] for t in first} == {"PASSED"}
    assert "atol=0.01 rtol=0.01" in first[0]["evaluation"]["environment"]["libs"]["eval_settings"]
    capsys.readouterr()
    assert run("--solution", sol, "--atol", "1e-6", "--rtol", "1e-6") == 1
    out = capsys.readouterr().out
    assert "3 trace(s) in" in out and "with other settings than this run's" in out
    assert {t["evaluation"]["status"] for t in _traces(tmp)} == {"INCORRECT_NUMERICAL"}
    assert _stale(tmp) == first


def test_a_trace_from_other_hardware_is_not_kept(toy, capsys):
    """A CPU check before a GPU run into the same folder: the GPU run must not keep the CPU's traces. Here the
    reverse, with the first traces' hardware rewritten to a GPU's."""
    tmp, write, run = toy
    sol = write("good", GOOD)
    assert run("--solution", sol) == 0
    path = tmp / "out" / "traces" / "tester" / "toy" / "toy_axpy.jsonl"
    gpu = [dict(t, evaluation=dict(t["evaluation"], environment=dict(t["evaluation"]["environment"],
                                                                     hardware="NVIDIA H200"))) for t in _traces(tmp)]
    path.write_text("".join(json.dumps(t) + "\n" for t in gpu))
    capsys.readouterr()
    assert run("--solution", sol) == 0
    assert "3 pairs evaluated;" in capsys.readouterr().out
    assert {t["evaluation"]["environment"]["hardware"] for t in _traces(tmp)} == {f"CPU {platform.machine()}"}
    assert _stale(tmp) == gpu


def test_a_trace_without_settings_is_kept_on_the_same_hardware(toy, capsys):
    """Traces written before traces kept their settings (every committed result) still resume."""
    tmp, write, run = toy
    sol = write("good", GOOD)
    assert run("--solution", sol) == 0
    path = tmp / "out" / "traces" / "tester" / "toy" / "toy_axpy.jsonl"
    old = _traces(tmp)
    for t in old:
        del t["evaluation"]["environment"]["libs"]["eval_settings"]
    path.write_text("".join(json.dumps(t) + "\n" for t in old))
    capsys.readouterr()
    assert run("--solution", sol) == 0
    assert "0 pairs evaluated, 3 kept from an earlier run" in capsys.readouterr().out
    assert _traces(tmp) == old


def test_a_kept_failure_is_shown_with_its_reason_and_sets_the_exit_status(toy, capsys):
    tmp, write, run = toy
    sol = write("broken", "def run(x, y, alpha, z):\n    raise ValueError('on purpose')\n")
    assert run("--solution", sol, "--workloads", "0") == 1
    capsys.readouterr()
    assert run("--solution", sol, "--workloads", "0") == 1
    out = capsys.readouterr().out
    assert "RUNTIME_ERROR" in out and " kept" in out                        # the table shows the kept verdict
    assert "(kept from an earlier run," in out and "on purpose" in out     # the failure and its reason
    assert "0 pairs evaluated, 1 kept from an earlier run" in out and "0 PASSED, 1 not" in out
    assert "inputs: -" not in out                                          # the kept trace's inputs are named
    assert run("--solution", sol, "--workloads", "0", "--exit-zero") == 0
    assert len(_traces(tmp)) == 1                                           # kept, not evaluated again


@pytest.mark.parametrize("damage, expected", [
    (lambda line: line[:100], "invalid JSON"),
    (lambda line: "[1, 2]", "a trace must be a JSON object, got list"),
])
def test_a_damaged_trace_line_is_an_error_naming_it(toy, capsys, damage, expected):
    """A line in the middle of a trace file edited or cut: one error naming file and line (it was a traceback)."""
    tmp, write, run = toy
    sol = write("good", GOOD)
    assert run("--solution", sol) == 0
    path = tmp / "out" / "traces" / "tester" / "toy" / "toy_axpy.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = damage(lines[1])
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert run("--solution", sol) == 2
    err = capsys.readouterr().err
    assert f"error: {path}:2: {expected}" in err and "fix or delete" in err


def test_a_timer_option_that_has_no_effect_on_the_cpu_keeps_the_traces(toy, capsys):
    """--timer cupti on the CPU is warned as having no effect, yet it went into the traces' settings, so the rerun
    moved every trace to stale/ and the trace said timer=cupti beside a wall-clock libs timer."""
    tmp, write, run = toy
    sol = write("good", GOOD)
    assert run("--solution", sol) == 0
    first = _traces(tmp)
    capsys.readouterr()
    assert run("--solution", sol, "--timer", "cupti") == 0
    out = capsys.readouterr().out
    assert "with other settings" not in out and _traces(tmp) == first
    assert "timer=auto" in first[0]["evaluation"]["environment"]["libs"]["eval_settings"]
