"""What a user meets first: one CLI with one option set, quick CPU defaults, failures that explain themselves,
sources checked before any child, and traces keyed by solution content (a toy dataset, on the CPU)."""
import json
import os

import pytest

from harness.eval import pool as isolation
from harness.cli import build_parser, main, run_options
from harness.eval.child import TimingConfig, official_timing
from tests.toy import make_toy_root, toy_solution

REPO = __import__("pathlib").Path(__file__).resolve().parent.parent

SHARED = ["--definition", "--workloads", "--dataset", "--out", "--quiet", "--device", "--isolation", "--resume",
          "--no-resume", "--timer", "--warmup", "--iterations", "--trials", "--timeout", "--atol", "--rtol",
          "--required-matched-ratio", "--reference-timing", "--no-profile-baseline", "--reference-budget",
          "--reference-output-cache", "--no-reference-output-cache", "--prepare-jobs", "--prestart", "--seed",
          "--strict", "--exit-zero"]
GOOD = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices


@pytest.mark.parametrize("command", ["eval", "compare", "full"])
def test_every_evaluating_subcommand_takes_the_same_options_with_the_same_defaults(command):
    sub = _subparsers()[command]
    help_text = sub.format_help()
    assert all(opt in help_text for opt in SHARED)
    defaults = {a.dest: a.default for a in sub._actions}
    eval_defaults = {a.dest: a.default for a in _subparsers()["eval"]._actions}
    assert {k: defaults[k] for k in eval_defaults if k in defaults and k != "help"} == \
           {k: eval_defaults[k] for k in eval_defaults if k in defaults and k != "help"}
    assert defaults["isolation"] == "worker" and defaults["resume"] is True


def test_all_subcommands_are_there():
    assert set(_subparsers()) >= {"eval", "compare", "full", "bench", "report", "package"}


def test_cpu_defaults_are_a_quick_check_and_gpu_defaults_official():
    from harness.data.dataset import Dataset

    prefill = Dataset().definition("gdn_prefill_qk4_v8_d128_k_last")
    args = build_parser().parse_args(["eval", "--solution", "ours"])
    assert run_options(args, "cpu", prefill, "o").timing == TimingConfig(0, 1, 1)
    gpu = run_options(args, "cuda", prefill, "o")
    assert gpu.timing == official_timing(prefill.name) == TimingConfig(1, 5, 3)
    assert gpu.reference_timing == TimingConfig(0, 1, 1)
    args = build_parser().parse_args(["eval", "--solution", "ours", "--iterations", "4"])
    assert run_options(args, "cpu", prefill, "o").timing == TimingConfig(0, 4, 1)


@pytest.fixture
def toy(tmp_path):
    root = make_toy_root(tmp_path / "toy")

    def write(name, body, **kw):
        path = tmp_path / f"{name}-{abs(hash(body))}.json"
        path.write_text(json.dumps(toy_solution(name, body, **kw)))
        return path

    def run(*extra, out="out"):
        return main(["eval", "--dataset", str(root), "--device", "cpu", "--quiet", "--no-reference-output-cache",
                     "--out", str(tmp_path / out), *extra])
    return tmp_path, write, run


def test_cpu_run_says_its_settings_and_shows_no_speedup(toy, capsys):
    tmp, write, run = toy
    assert run("--solution", str(write("good", GOOD))) == 0
    out = capsys.readouterr().out
    assert "CPU device: 0 warmup, 1 timed call(s) per trial, 1 trial(s)" in out
    rows = [line for line in out.splitlines() if " good " in line and "PASSED" in line]
    assert len(rows) == 3 and all(line.rstrip().endswith("-") for line in rows)
    assert main(["report", str(tmp / "out"), "--dataset", str(tmp / "toy"), "--out", str(tmp / "rep")]) == 0
    printed = capsys.readouterr().out
    header = printed.splitlines()[0].split()   # the headline columns only; the files have all
    assert "NaN" not in printed   # no speedup on the CPU: '-' as in report.md
    assert header == ["definition", "solution", "passed", "workloads", "mean_latency_us", "mean_speedup_vs_baseline",
                      "official_score_vs_baseline"]
    import pandas as pd
    summary = pd.read_csv(tmp / "rep" / "report" / "summary.csv")
    assert summary.mean_speedup_vs_reference.isna().all()
    md = (tmp / "rep" / "report" / "report.md").read_text()
    assert "CPU run: latencies are wall clock" in md and "Reference latency missing" not in md


def test_a_wrong_solution_shows_which_output_and_how_many_elements_and_exits_1(toy, capsys):
    tmp, write, run = toy
    wrong = write("wrong", "def run(x, y, alpha, z):\n    z.copy_(x - alpha * y)\n")
    assert run("--solution", str(wrong)) == 1
    out = capsys.readouterr().out
    assert out.count("INCORRECT_NUMERICAL: wrong on") == 3
    assert "output 'z'" in out and "elements" in out
    assert f"trace: {tmp / 'out' / 'traces' / 'tester' / 'toy' / 'toy_axpy.jsonl'}" in out
    assert run("--solution", str(wrong), "--no-resume", "--exit-zero") == 0


def test_a_passed_pairs_warnings_are_shown_once_per_kind(toy, capsys):
    _, write, run = toy
    body = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n    y.zero_()\n"   # right, but writes an input
    assert run("--solution", str(write("writer", body))) == 0
    out = capsys.readouterr().out
    assert "  warning: writer: inputs modified by the call: y (3 pairs)" in out
    assert "toy_axpy: 3 pairs evaluated;" in out


def test_a_timeout_names_the_option_that_sets_it(toy, capsys):
    _, write, run = toy
    sleeper = write("sleeper", "import time\ndef run(x, y, alpha, z):\n    time.sleep(30)\n")
    assert run("--solution", str(sleeper), "--workloads", "0", "--timeout", "2") == 1
    out = capsys.readouterr().out
    assert "TIMEOUT: sleeper on" in out and "(the pair's --timeout; give it more with --timeout SECONDS)" in out


def test_a_runtime_error_shows_the_end_of_its_traceback(toy, capsys):
    _, write, run = toy
    assert run("--solution", str(write("raises", "def run(x, y, alpha, z):\n    raise KeyError('the-key')\n"))) == 1
    out = capsys.readouterr().out
    assert "RUNTIME_ERROR: raises on" in out and "KeyError: 'the-key'" in out
    # the frame is named by the solution's source, not the build cache's copy of it
    assert 'File "main.py" (its copy in the build cache), line 2, in run' in out and "/builds/" not in out


@pytest.mark.parametrize("body, entry, expected", [
    (GOOD, "main.py::runn", "entry point 'runn' is not defined in main.py (it defines: run)"),
    ("import not_a_module_anywhere\n" + GOOD, "main.py::run", "imports not_a_module_anywhere"),
    ("def run(x, y, z):\n    pass\n", "main.py::run", "expected 4 positional parameters"),
])
def test_what_the_sources_tell_is_caught_before_any_child(toy, capsys, monkeypatch, body, entry, expected):
    _, write, run = toy

    def no_child(*a, **k):
        raise AssertionError("a child was started")

    monkeypatch.setattr(isolation._Child, "__init__", no_child)
    assert run("--solution", str(write("static", body, entry=entry)), "--isolation", "process") == 1
    out = capsys.readouterr().out
    assert "COMPILE_ERROR on every workload, found in its sources before any child started" in out
    assert expected in out
    assert out.count("COMPILE_ERROR: static on") == 3


MISSING = "imports not_a_module_anywhere"


@pytest.mark.parametrize("main, helper_path, says", [
    (GOOD, "unused.py", None),                                       # nothing imports it: the build never runs it
    ("from . import helpers\n" + GOOD, "helpers.py", MISSING),        # imported relatively: the build fails on it
    ("from .pkg.helpers import x\n" + GOOD, "pkg/helpers.py", MISSING),  # a subpackage
    # imported as a top-level module: the build does not find it at all (only the package's folder is on sys.path)
    ("import helpers\n" + GOOD, "helpers.py", "main.py:1 imports its own module 'helpers' as a top-level one"),
])
def test_a_missing_import_counts_only_in_sources_the_entry_imports(toy, capsys, main, helper_path, says):
    """A missing module imported by a source file nothing imports is no COMPILE_ERROR (it was, as for the entry)."""
    _, write, run = toy
    helper = {"path": helper_path, "content": "import not_a_module_anywhere\nx = 1\n"}
    assert run("--solution", str(write("helped", main, extra_sources=[helper]))) == (1 if says else 0)
    out = capsys.readouterr().out
    assert (says or MISSING) in out if says else MISSING not in out
    assert out.count("COMPILE_ERROR: helped on") == (3 if says else 0)   # every workload


@pytest.mark.parametrize("helper, says", [
    ("def f(x)\n    return x\n", "util.py:1: syntax error: expected ':' (the entry imports it)"),
    ("import not_a_module_anywhere\n", MISSING),
])
def test_what_an_imported_source_tells_is_caught_before_any_child(toy, tmp_path, capsys, helper, says):
    _, write, run = toy
    sol = write("helped", "from .util import *\n" + GOOD, extra_sources=[{"path": "util.py", "content": helper}])
    assert run("--solution", str(sol)) == 1
    assert says in capsys.readouterr().out


def test_an_entry_point_bound_by_an_import_is_left_to_the_build(toy, capsys):
    _, write, run = toy
    helper = {"path": "impl.py", "content": GOOD}
    sol = write("imported", "from .impl import run\n", extra_sources=[helper])
    assert run("--solution", str(sol)) == 0


def _traces(tmp, out="out"):
    path = tmp / out / "traces" / "tester" / "toy" / "toy_axpy.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_an_edited_solution_is_evaluated_again_and_its_old_traces_leave_the_report(toy, capsys):
    tmp, write, run = toy
    assert run("--solution", str(write("mine", "def run(x, y, alpha, z):\n    z.copy_(x)\n"))) == 1
    old = _traces(tmp)
    assert [t["evaluation"]["status"] for t in old] == ["INCORRECT_NUMERICAL"] * 3
    capsys.readouterr()
    assert run("--solution", str(write("mine", GOOD))) == 0      # same name, edited body
    out = capsys.readouterr().out
    assert "3 trace(s)" in out and "other content under this name" in out and "3 PASSED" in out
    new = _traces(tmp)
    assert [t["evaluation"]["status"] for t in new] == ["PASSED"] * 3
    assert len({t["evaluation"]["environment"]["libs"]["solution_digest"] for t in old + new}) == 2
    stale = tmp / "out" / "stale" / "tester" / "toy" / "toy_axpy.jsonl"
    assert [json.loads(x) for x in stale.read_text().splitlines()] == old      # nothing lost
    assert main(["report", str(tmp / "out"), "--dataset", str(tmp / "toy"), "--out", str(tmp / "rep")]) == 0
    import pandas as pd
    assert set(pd.read_csv(tmp / "rep" / "report" / "toy_axpy.csv").status) == {"PASSED"}


def test_a_second_run_into_a_folder_another_run_is_writing_into_is_refused(toy, capsys):
    from harness.eval.out_lock import LOCK_NAME, writing_into
    tmp, write, run = toy
    sol = str(write("good", GOOD))
    with writing_into(tmp / "out"):    # as a run in another process holds it
        assert run("--solution", sol) == 2
        assert f"another gdn-harness run is writing traces into this folder (pid {os.getpid()})" in \
            capsys.readouterr().err
        assert not list((tmp / "out").glob("traces/*/*/*.jsonl"))
    assert run("--solution", sol) == 0 and not (tmp / "out" / LOCK_NAME).exists()


def test_resume_skips_the_same_content_and_no_resume_replaces_without_duplicates(toy, capsys):
    tmp, write, run = toy
    sol = str(write("mine", GOOD))
    assert run("--solution", sol) == 0
    first = _traces(tmp)
    assert run("--solution", sol) == 0
    assert "3 kept from an earlier run (same content, hardware and settings)" in capsys.readouterr().out
    assert _traces(tmp) == first
    assert run("--solution", sol, "--no-resume", "--workloads", "0-1") == 0
    again = _traces(tmp)
    assert len(again) == 3 and sorted(t["workload"]["uuid"] for t in again) == sorted(t["workload"]["uuid"]
                                                                                        for t in first)
    assert "2 earlier trace(s) of the pairs evaluated again (--no-resume) moved to" in capsys.readouterr().out


def test_two_solutions_under_one_name_in_one_run_are_refused(toy, capsys):
    _, write, run = toy
    assert run("--solution", str(write("same", GOOD)), "--solution", str(write("same", GOOD + "\n"))) == 2
    assert "two solutions share a name" in capsys.readouterr().err


def test_the_definition_comes_from_the_solution_when_not_named(toy, capsys):
    _, write, run = toy
    assert run("--solution", str(write("good", GOOD))) == 0
    assert "toy_axpy: 3 workloads x ['good'] on cpu" in capsys.readouterr().out


def test_built_in_names_join_the_definitions_of_the_paths_named(tmp_path, capsys):
    """A decode kit beside a built-in name is a decode run; built-in names alone stand for every definition."""
    from harness.data.dataset import Dataset
    from harness.data.resolve import definitions_of

    kit = str(REPO / "examples" / "gdn_decode_qk4_v8_d128_k_last")
    both = ["gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"]
    assert definitions_of([kit, "baseline", "ours"], Dataset()) == both[:1]
    assert definitions_of(["ours", "baseline"], Dataset()) == both
    assert main(["compare", "--solution", kit, "--solution", "reference", "--device", "cpu", "--workloads", "0",
                 "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "gdn_decode_qk4_v8_d128_k_last: 1 workload x" in out and "gdn_prefill" not in out
    md = (tmp_path / "out" / "compare" / "gdn_decode_qk4_v8_d128_k_last.md").read_text()
    assert "**Timed with the CPU wall clock**" in md   # a CPU compare's ratios are no speed figure, and say so


def test_errors_go_to_stderr_with_exit_2(toy, capsys):
    _, _, run = toy
    assert run("--solution", "no/such/kit", "--definition", "toy_axpy") == 2
    captured = capsys.readouterr()
    assert "error: no/such/kit: no such solution file or folder" in captured.err and "error" not in captured.out


def test_a_folder_that_holds_no_solution_is_named(toy, tmp_path, capsys):
    _, _, run = toy
    kit = tmp_path / "kit_without_config"
    (kit / "solution" / "python").mkdir(parents=True)
    (kit / "solution" / "python" / "main.py").write_text(GOOD)
    assert run("--solution", str(kit)) == 2
    err = capsys.readouterr().err
    assert f"error: {kit}: holds no solution: not a starter-kit folder (config.toml" in err
    assert "a starter kit needs a config.toml beside solution/<language>/" in err


def test_a_folder_of_kits_named_as_one_solution_lists_them(tmp_path, capsys):
    kits = REPO / "examples"
    assert main(["eval", "--solution", str(kits), "--device", "cpu", "--out", str(tmp_path / "o")]) == 2
    decode = kits / "gdn_decode_qk4_v8_d128_k_last"
    listed = f"it holds starter kits: name one, or each with its own --solution: {decode}"
    assert listed in capsys.readouterr().err


def test_a_kit_read_with_a_note_says_so_when_evaluated(tmp_path, capsys):
    import shutil

    kit = tmp_path / "kit"
    shutil.copytree(REPO / "examples" / "gdn_decode_qk4_v8_d128_k_last", kit)
    config = kit / "config.toml"
    config.write_text(config.read_text().replace('\n[build]\n', '\n[build]\ntarget_hardware = "cuda"\n'))
    assert main(["eval", "--solution", str(kit), "--device", "cpu", "--workloads", "0", "--quiet",
                 "--no-reference-output-cache", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "target_hardware" in err and "one-element list" in err


def test_auto_and_cupti_share_reference_cache_keys():
    from harness.eval.reference_latency import timer_key
    assert timer_key("cupti") == timer_key("auto") != timer_key("events")


def test_a_gpu_run_says_it_times_extra_calls_with_events():
    from harness.data.dataset import Dataset
    from harness.eval.options import differences

    decode = Dataset().definition("gdn_decode_qk4_v8_d128_k_last")
    args = build_parser().parse_args(["eval", "--solution", "ours"])
    gpu, cpu = differences(run_options(args, "cuda", decode, "o")), differences(run_options(args, "cpu", decode, "o"))
    assert any("timed with CUDA events" in n for n in gpu) and not any("timed with CUDA events" in n for n in cpu)


@pytest.mark.parametrize("target", ["eval", "tune", "test-gpu"])
def test_a_gpu_target_stops_where_the_venv_cannot_be_made(tmp_path, target):
    """Where python3 has no torch, the GPU targets make .venv first; if that fails they stop there, not run an empty
    interpreter name ("-m: not found")."""
    import shutil
    import subprocess

    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("")
    _fake(tmp_path, "python3", 1)   # no torch, and no venv either
    _fake(tmp_path, "nvidia-smi", 0)   # a GPU host
    run = subprocess.run(["make", target], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert run.returncode != 0
    assert "not found" not in run.stdout + run.stderr, run.stdout + run.stderr
    assert ".venv/.installed" in run.stderr   # it stopped at making the venv


def _fake(tmp_path, name, status):
    """A command on tmp_path/bin that only exits with `status`."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    fake = tmp_path / "bin" / name
    fake.write_text(f"#!/bin/sh\nexit {status}\n")
    fake.chmod(0o755)


@pytest.mark.parametrize("target", ["eval", "bench", "tune", "public", "test-gpu", "check", "compare"])
def test_a_gpu_target_stops_before_making_a_venv_on_a_host_without_a_gpu(tmp_path, target):
    """No venv of several GB made on a CPU-only machine for a target that then refuses to run there; check and
    compare without DEVICE=cpu are GPU runs too (they would run every workload on the CPU, for hours)."""
    import os
    import shutil
    import subprocess

    if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg"):
        pytest.skip("this host has an NVIDIA GPU")
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    _fake(tmp_path, "python3", 1)
    _fake(tmp_path, "nvidia-smi", 1)
    sols = ["SOLS=my_kit"] if target in ("check", "compare", "public", "tune") else []   # the others take none
    run = subprocess.run(["make", target, *sols], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert run.returncode == 2, run.stdout + run.stderr
    assert "GPU" in run.stderr and "python3 -m venv" not in run.stdout and not (tmp_path / ".venv").exists()
    if target in ("check", "compare"):
        assert "add DEVICE=cpu" in run.stderr


@pytest.mark.parametrize("target", ["package", "check DEVICE=cpu SOLS=my_kit"])
def test_a_cpu_target_makes_the_venv_where_python3_has_no_torch(tmp_path, target):
    """make package / make check DEVICE=cpu on a fresh clone (no .venv, python3 without torch) make the venv first:
    they ran python3 and failed with "No module named 'torch'"."""
    import shutil
    import subprocess

    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("")
    _fake(tmp_path, "python3", 1)
    run = subprocess.run(["make", *target.split()], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert run.returncode != 0
    assert "python3 -m venv .venv" in run.stdout and ".venv/.installed" in run.stderr, run.stdout + run.stderr


def test_make_public_stops_before_fetching_where_there_is_no_gpu(tmp_path):
    """No clone of 40 repositories on a machine that cannot time them."""
    import subprocess
    import sys

    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here")
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "python3"   # a python3 with torch (this one): no venv is made
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    run = subprocess.run(["make", "-f", str(REPO / "Makefile"), "public"], cwd=tmp_path, capture_output=True,
                         text=True, env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert run.returncode != 0
    assert "make public: the entries are timed on a CUDA GPU, none here" in run.stderr
    assert "fetch" not in run.stdout


def test_a_kit_for_a_definition_the_dataset_lacks_is_named(tmp_path, capsys):
    """The error names the kit and its definition (it named the dataset root: "unknown definition")."""
    import shutil

    kit = tmp_path / "kit"
    shutil.copytree(REPO / "examples" / "gdn_decode_qk4_v8_d128_k_last", kit)
    cfg = kit / "config.toml"
    cfg.write_text(cfg.read_text().replace('definition = "gdn_decode_qk4_v8_d128_k_last"', 'definition = "gdn_dec"'))
    assert main(["eval", "--solution", str(kit), "--device", "cpu", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"error: {kit}: solution 'example-gdn-decode' is for definition 'gdn_dec'" in err


def test_a_definition_trace_or_config_named_as_a_solution_says_what_it_is(tmp_path, capsys):
    """It said "solution: missing required field 'spec'"."""
    definition = REPO / "workloads" / "definitions" / "gdn" / "gdn_decode_qk4_v8_d128_k_last.json"
    assert main(["eval", "--solution", str(definition), "--device", "cpu", "--out", str(tmp_path / "o")]) == 2
    assert "this is a definition, not a solution" in capsys.readouterr().err
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"definition": "d", "workload": {}, "solution": "s", "evaluation": None}))
    assert main(["eval", "--solution", str(trace), "--device", "cpu", "--out", str(tmp_path / "o")]) == 2
    assert "this is a trace, not a solution" in capsys.readouterr().err
    kit = REPO / "examples" / "gdn_decode_qk4_v8_d128_k_last"
    assert main(["eval", "--solution", str(kit / "config.toml"), "--device", "cpu", "--out", str(tmp_path / "o")]) == 2
    assert f"is a starter kit's config.toml (fix: name the kit's folder: --solution {kit})" in capsys.readouterr().err
    assert main(["package", "--submission", str(kit / "config.toml"), "--out", str(tmp_path / "p")]) == 2
    assert f"config.toml: not a folder (fix: give the kit's folder: --submission {kit})" in capsys.readouterr().err
    # a source file of a kit said "invalid JSON"; an output folder, "missing required field 'name'" of a report's JSON
    source = kit / "solution" / "python" / "main.py"
    assert main(["eval", "--solution", str(source), "--device", "cpu", "--out", str(tmp_path / "o")]) == 2
    assert f"is a source file of the starter kit {kit} (fix: name the kit's folder" in capsys.readouterr().err
    (tmp_path / "run" / "traces").mkdir(parents=True)
    (tmp_path / "run" / "report").mkdir()
    (tmp_path / "run" / "report" / "summary.json").write_text("{}")
    assert main(["eval", "--solution", str(tmp_path / "run"), "--device", "cpu", "--out", str(tmp_path / "o")]) == 2
    assert "is a run's output folder (it holds traces/), not a solution" in capsys.readouterr().err


def test_make_targets_take_the_kit_named_and_refuse_variables_they_do_not_use(tmp_path):
    """`make package SOLS=my_kit` packed submission/ (our kernels) without a word, and `make eval SOLS=my_kit` ran
    ours: package and tune read no SOLS, DEF or ARGS. Now SOLS names the folder, ARGS passes through, and a variable
    a target has no use for stops it."""
    import shutil
    import subprocess

    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")

    def make(*args):
        return subprocess.run(["make", *args], cwd=tmp_path, capture_output=True, text=True)

    dry = make("-n", "package", "SOLS=my_kit", "OUT=o", "ARGS=--dataset d")
    assert "harness package --submission my_kit --out o --dataset d" in dry.stdout, dry.stdout
    dry = make("-n", "tune", "SOLS=my_kit", "DEF=gdn_decode_qk4_v8_d128_k_last")
    assert "harness tune --submission my_kit --definition gdn_decode_qk4_v8_d128_k_last" in dry.stdout, dry.stdout
    dry = make("-n", "public", "SOLS=my_kit", "FROM=f")
    assert "harness public run --solution my_kit" in " ".join(dry.stdout.split()), dry.stdout
    for args, says in [(["package", "DEF=x"], "make package takes no DEF"),
                       (["package", "SOLS=a b"], "SOLS names one folder"),
                       (["tune", "WORKLOADS=0-3"], "make tune takes no WORKLOADS"),
                       (["eval", "SOLS=my_kit"], "make eval takes no SOLS"),   # it ran ours in silence
                       (["bench", "WORKLOADS=0-3"], "make bench takes no WORKLOADS"),
                       (["compare", "SOLS=a b", "FROM=f"], "make compare takes no FROM")]:
        run = make(*args)
        assert run.returncode == 2 and says in run.stderr, run.stderr


def test_progress_into_a_log_file_is_plain_lines(toy, capsys):
    """Into a file (a GPU job's log) the bar wrote each refresh after a carriage return, so a log kept them all on
    one line; now each is a line of its own, the last one at 100 %."""
    tmp, write, run = toy
    root = tmp / "toy"
    assert main(["eval", "--dataset", str(root), "--device", "cpu", "--no-reference-output-cache",
                 "--out", str(tmp / "out"), "--solution", str(write("good", GOOD))]) == 0
    err = capsys.readouterr().err   # capsys's stderr is no terminal
    bars = [line for line in err.splitlines() if line.startswith("toy_axpy:")]
    assert "\r" not in err and bars and "100%" in bars[-1] and "3/3" in bars[-1], err
