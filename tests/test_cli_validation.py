"""User errors on the command line: a one-line `error: ...` and exit 2 before any pair runs (not a traceback
mid-run), and a one-line warning for an option that is accepted but has no effect (a toy dataset, on the CPU)."""
import json
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import harness.cli as cli
from harness.cli import build_parser, main, select_workloads
from harness.data.jsonio import DataError
from tests.toy import make_toy_root, toy_solution

GOOD = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"


@pytest.fixture
def toy(tmp_path):
    """(tmp, run): run(*extra, out=...) is `eval` of a passing toy solution on the toy dataset on the CPU."""
    root = make_toy_root(tmp_path / "toy")
    sol = tmp_path / "good.json"
    sol.write_text(json.dumps(toy_solution("good", GOOD)))

    def run(*extra, out=None):
        return main(["eval", "--dataset", str(root), "--device", "cpu", "--quiet", "--no-reference-output-cache",
                     "--solution", str(sol), "--out", str(out or tmp_path / "out"), *extra])
    return tmp_path, run


@pytest.fixture
def no_pairs(monkeypatch):
    """Evaluation replaced by a recorder of its calls: what eval/compare decide before any pair runs."""
    calls = []

    def run_definition(dataset, definition, workloads, solutions, opts, *rest, **kw):
        calls.append((definition.name, [w.uuid for w in workloads]))
        return []
    monkeypatch.setattr("harness.eval.console.run_definition", run_definition)
    return calls


def _one_error_line(err, *needles):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert all(n in lines[0] for n in needles), err
    assert "Traceback" not in err


def _parse_error(capsys, argv, option):
    """argparse refuses argv: exit 2, naming the option."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument {option}:" in err and "Traceback" not in err
    return err


# 1. --out: a file, a folder under a file, a folder that cannot be written; OSError escaping a command

@pytest.mark.parametrize("command", ["eval", "compare", "package", "report", "agreement", "bench"])
def test_an_out_that_is_a_file_is_refused_up_front(tmp_path, capsys, no_pairs, command):
    root = make_toy_root(tmp_path / "toy")
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    argv = {"eval": ["eval", "--solution", "reference", "--dataset", str(root), "--device", "cpu"],
            "compare": ["compare", "--solution", "reference", "--solution", "reference", "--dataset", str(root),
                        "--device", "cpu"],
            "package": ["package"],
            "report": ["report", str(tmp_path)],
            "agreement": ["agreement", "--run", str(tmp_path), "--against", str(tmp_path)],
            "bench": ["bench"]}[command]
    assert main([*argv, "--out", str(afile)]) == 2
    _one_error_line(capsys.readouterr().err, str(afile), "--out names a file, not a folder")
    assert afile.read_text() == "not a folder" and not no_pairs


def test_an_out_under_a_file_cannot_be_created_and_says_why(toy, capsys, no_pairs):
    tmp, run = toy
    (tmp / "afile").write_text("")
    assert run(out=tmp / "afile" / "sub") == 2
    _one_error_line(capsys.readouterr().err, f"cannot be created: {tmp / 'afile'} is a file, not a folder")
    assert not no_pairs


def test_an_out_this_user_cannot_write_is_refused_up_front(toy, capsys, monkeypatch, no_pairs):
    tmp, run = toy
    locked = tmp / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if str(path).startswith(str(locked))
                        else real(path, mode, **kw))
    assert run(out=locked) == 2
    _one_error_line(capsys.readouterr().err, str(locked), "--out is a folder this user cannot write to")
    assert run(out=locked / "new") == 2
    _one_error_line(capsys.readouterr().err, f"cannot be created: this user cannot write to {locked}")
    assert not no_pairs


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_out_is_refused_up_front(toy, capsys, no_pairs):
    tmp, run = toy
    locked = tmp / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert run(out=locked) == 2
    finally:
        locked.chmod(0o755)
    _one_error_line(capsys.readouterr().err, "cannot write to")


def test_an_os_error_escaping_a_command_is_one_line_and_exit_2(monkeypatch, capsys):
    def raises(args):
        raise PermissionError(13, "Permission denied", "/some/where/traces")
    monkeypatch.setattr(cli, "cmd_package", raises)
    assert main(["package"]) == 2
    assert capsys.readouterr().err == "error: /some/where/traces: Permission denied\n"

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "cmd_package", interrupted)
    assert main(["package"]) == 130      # unchanged
    assert "run the same command again to resume" in capsys.readouterr().err


def test_sigterm_stops_a_command_as_ctrl_c_does_with_the_resume_hint(monkeypatch, capsys):
    def terminated(args):   # e.g. `timeout` or a batch system ending the run
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        return 0
    monkeypatch.setattr(cli, "cmd_package", terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["package"]) == 143
    assert "interrupted: traces written so far are kept; run the same command again to resume" in \
        capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before   # the caller's handler is back


def test_an_interrupted_run_names_the_report_of_the_pairs_it_finished(monkeypatch, capsys, tmp_path):
    def interrupted(args):
        (tmp_path / "run" / "traces").mkdir(parents=True)
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "cmd_eval", interrupted)
    assert main(["eval", "--solution", "ours", "--out", str(tmp_path / "run")]) == 130
    assert f"gdn-harness report {tmp_path / 'run'} --out {tmp_path / 'run'}" in capsys.readouterr().err
    monkeypatch.setattr(cli, "cmd_eval", lambda args: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert main(["eval", "--solution", "ours", "--out", str(tmp_path / "none")]) == 130
    assert "gdn-harness report" not in capsys.readouterr().err   # nothing traced: no report to name


# 2. --device

@pytest.mark.parametrize("command", [["eval", "--solution", "ours"], ["compare", "--solution", "ours"], ["tune"]])
@pytest.mark.parametrize("device", ["tpu", "cuda:", "cuda:x", "CPU", "gpu0"])
def test_a_device_other_than_cpu_cuda_or_cuda_n_is_refused_at_parse_time(capsys, command, device):
    err = _parse_error(capsys, [*command, "--device", device], "--device")
    assert "expected cpu, cuda or cuda:N" in err


def test_cuda_n_is_accepted_and_device_of_checks_what_it_is_given():
    for device in ("cpu", "cuda", "cuda:0", "cuda:12"):
        assert build_parser().parse_args(["eval", "--solution", "ours", "--device", device]).device == device
    with pytest.raises(DataError, match="expected cpu, cuda or cuda:N"):
        cli.device_of(SimpleNamespace(device="tpu", timer="auto"))


# 3. --workloads

def test_an_open_range_is_refused_saying_how_to_write_it(toy, capsys, no_pairs):
    _, run = toy
    assert run("--workloads", "1-") == 2
    _one_error_line(capsys.readouterr().err, "range '1-' has no end", "1-2 for workload 1 to the last")
    assert not no_pairs


@pytest.mark.parametrize("selector", [",", " , ,", "   ", ""])
def test_an_empty_selector_is_refused(toy, capsys, no_pairs, selector):
    _, run = toy
    assert run("--workloads", selector) == 2
    _one_error_line(capsys.readouterr().err, "--workloads", "selects nothing")
    assert not no_pairs


def _workloads(*uuids):
    return [SimpleNamespace(uuid=u) for u in uuids]


def test_digits_that_are_no_index_are_a_uuid_prefix():
    ws = _workloads(*[f"{i:02d}abcdef-0000" for i in range(40)], "80288532-1111", "12345678-aaaa", "12399999-bbbb",
                    "30000000-cccc")
    picked = lambda selector: [w.uuid for w in select_workloads(ws, selector)]   # noqa: E731
    assert picked("80288532") == ["80288532-1111"]          # as the run's table prints it: no index of 44
    assert picked("80288532-1111") == ["80288532-1111"]     # a whole uuid of digits and a dash: not a range
    assert picked("3") == [ws[3].uuid]                      # a valid index stays an index ('30000000' begins '3')
    assert picked("40-41") == [ws[40].uuid, ws[41].uuid]
    with pytest.raises(DataError, match="'123' matches 2 workload uuids .*; need exactly one"):
        select_workloads(ws, "123")
    with pytest.raises(DataError, match="index '99' outside 0-43"):
        select_workloads(ws, "99")
    with pytest.raises(DataError, match="range '40-99' outside 0-43"):
        select_workloads(ws, "40-99")
    for number in ("-1", "1.5"):   # no hint said why a number is no index
        with pytest.raises(DataError, match="indices are whole numbers from 0 to 43"):
            select_workloads(ws, number)
    assert picked("8028853") == picked("80288532")   # uuids are lower-case hex; a prefix is taken in any case
    assert [w.uuid for w in select_workloads(_workloads("abcdef12-0000"), "ABCDEF")] == ["abcdef12-0000"]


def test_a_uuid_prefix_picks_from_the_definition_it_names_when_a_solution_spans_two(tmp_path, capsys, no_pairs):
    from harness.data.dataset import Dataset
    ds = Dataset()
    prefill = ds.workloads(ds.definition("gdn_prefill_qk4_v8_d128_k_last"))
    decode = ds.workloads(ds.definition("gdn_decode_qk4_v8_d128_k_last"))
    assert main(["eval", "--solution", "ours", "--device", "cpu", "--quiet", "--out", str(tmp_path / "o"),
                 "--workloads", prefill[5].uuid[:8].upper()]) == 0
    assert no_pairs == [("gdn_prefill_qk4_v8_d128_k_last", [prefill[5].uuid])]
    assert "gdn_decode_qk4_v8_d128_k_last: not run: --workloads" in capsys.readouterr().out
    no_pairs.clear()   # indices pick from each definition, uuid prefixes from theirs
    assert main(["eval", "--solution", "ours", "--device", "cpu", "--quiet", "--out", str(tmp_path / "o"),
                 "--workloads", f"0,{prefill[5].uuid[:8]}"]) == 0
    assert no_pairs == [("gdn_decode_qk4_v8_d128_k_last", [decode[0].uuid]),
                        ("gdn_prefill_qk4_v8_d128_k_last", [prefill[0].uuid, prefill[5].uuid])]
    assert main(["eval", "--solution", "ours", "--device", "cpu", "--out", str(tmp_path / "o"),
                 "--workloads", "fedcba98"]) == 2   # a prefix of no workload of either definition
    assert "'fedcba98' matches 0 workload uuids" in capsys.readouterr().err


def test_an_index_only_one_definition_has_runs_that_one_and_says_so(tmp_path, capsys, no_pairs):
    """`--workloads 60` with a solution spanning both definitions was refused ("outside 0-53": decode's 54) though
    prefill has 100 workloads; an index neither has names both."""
    from harness.data.dataset import Dataset
    ds = Dataset()
    prefill = ds.workloads(ds.definition("gdn_prefill_qk4_v8_d128_k_last"))
    assert main(["eval", "--solution", "ours", "--device", "cpu", "--quiet", "--out", str(tmp_path / "o"),
                 "--workloads", "60"]) == 0
    assert no_pairs == [("gdn_prefill_qk4_v8_d128_k_last", [prefill[60].uuid])]
    assert "gdn_decode_qk4_v8_d128_k_last: not run: --workloads 60: index '60' outside 0-53 there" in \
        capsys.readouterr().out
    assert main(["eval", "--solution", "ours", "--device", "cpu", "--out", str(tmp_path / "o"),
                 "--workloads", "200"]) == 2
    _one_error_line(capsys.readouterr().err, "outside 0-53 on gdn_decode_qk4_v8_d128_k_last",
                    "outside 0-99 on gdn_prefill_qk4_v8_d128_k_last")


def test_a_digit_uuid_prefix_selects_its_workload_end_to_end(tmp_path, capsys, no_pairs):
    root = make_toy_root(tmp_path / "toy")
    rows = root / "workloads" / "toy" / "toy_axpy.jsonl"
    rows.write_text(rows.read_text().replace('"w-blob"', '"80288532-9f00-4e1a-8d2b-000000000000"'))
    assert main(["eval", "--solution", "reference", "--dataset", str(root), "--device", "cpu", "--quiet",
                 "--workloads", "80288532", "--out", str(tmp_path / "out")]) == 0
    assert no_pairs == [("toy_axpy", ["80288532-9f00-4e1a-8d2b-000000000000"])]


# 4. options that make no sense, a definition named twice, report --base, options with no effect

@pytest.mark.parametrize("option, value", [("--timeout", "0"), ("--timeout", "-5"), ("--timeout", "nan"),
                                           ("--atol", "-1"), ("--rtol", "-1"), ("--rtol", "nan"),
                                           ("--required-matched-ratio", "2"), ("--required-matched-ratio", "0"),
                                           ("--required-matched-ratio", "-0.5"), ("--reference-budget", "-3")])
@pytest.mark.parametrize("command", [["eval", "--solution", "ours"], ["public", "run"]])
def test_a_meaningless_number_is_refused_at_parse_time(capsys, command, option, value):
    _parse_error(capsys, [*command, f"{option}={value}"], option)


def test_meaningful_numbers_are_accepted():
    args = build_parser().parse_args(["eval", "--solution", "ours", "--timeout", "0.5", "--atol", "0", "--rtol", "0",
                                      "--required-matched-ratio", "1"])
    assert (args.timeout, args.atol, args.rtol, args.required_matched_ratio) == (0.5, 0.0, 0.0, 1.0)


def test_a_definition_named_twice_runs_once(toy, no_pairs):
    _, run = toy
    assert run("--definition", "toy_axpy", "--definition", "toy_axpy") == 0
    assert [name for name, _ in no_pairs] == ["toy_axpy"]


def test_report_refuses_a_base_with_no_traces_and_warns_beside_one_that_has(toy, capsys):
    tmp, run = toy
    assert run("--workloads", "0", "--isolation", "none") == 0
    capsys.readouterr()
    report = ["report", str(tmp / "out"), "--dataset", str(tmp / "toy")]
    assert main([*report, "--out", str(tmp / "rep"), "--base", "nope"]) == 2
    _one_error_line(capsys.readouterr().err, "--base", "'nope'", "name one of ['good']")
    assert not (tmp / "rep").exists()             # refused before anything is written
    assert main([*report, "--out", str(tmp / "rep2"), "--base", "good", "--base", "nope"]) == 0
    err = capsys.readouterr().err
    assert "warning: --base 'nope': no solution of that name in these runs" in err and "there: good" in err


def test_prestart_without_process_isolation_warns_that_it_has_no_effect(toy, capsys, no_pairs):
    _, run = toy
    assert run("--prestart", "2") == 0
    assert "warning: --prestart has no effect with --isolation worker" in capsys.readouterr().err
    assert run("--prestart", "2", "--isolation", "process") == 0
    assert "--prestart" not in capsys.readouterr().err


def test_full_warns_about_prestart_too(monkeypatch, capsys):
    monkeypatch.setattr("harness.full.run_full", lambda args, argv: 0)
    assert main(["full", "--prestart", "1", "--isolation", "none"]) == 0
    assert "warning: --prestart has no effect with --isolation none" in capsys.readouterr().err


@pytest.mark.parametrize("timer", ["cupti", "events"])
def test_a_timer_on_the_cpu_warns_that_it_has_no_effect(toy, capsys, no_pairs, timer):
    _, run = toy
    assert run("--timer", timer) == 0
    err = capsys.readouterr().err
    assert f"warning: --timer {timer} has no effect on the CPU" in err
    assert run() == 0 and "--timer" not in capsys.readouterr().err


# 5. help texts; public fetch --from a file

def _parser(*path):
    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if a.dest in ("command", "public_action")).choices[name]
    return parser


def _option_help(path, option):
    return next(a.help for a in _parser(*path)._actions if option in a.option_strings) or ""


def test_every_out_and_dataset_says_what_it_is_and_its_default():
    assert _option_help(["report"], "--out") and _option_help(["report"], "--dataset")
    assert _option_help(["agreement"], "--out")
    assert "default: results/local" in _option_help(["eval"], "--out")
    assert "default: results/compare" in _option_help(["compare"], "--out")
    assert "default: results/<gpu>/public" in _option_help(["public", "run"], "--out")


@pytest.mark.parametrize("path", [("full",), ("bench",), ("public", "run")])
def test_definition_defaults_say_what_commands_without_solution_run(path):
    text = _option_help(path, "--definition")
    assert "the solutions are for" not in text and "every definition of the dataset" in text


def test_the_top_level_help_lists_every_subcommand_once_and_every_public_action():
    """It listed the subcommands twice, in two wordings (the description's list and argparse's)."""
    text = build_parser().format_help()
    lines = [line.split() for line in text.splitlines() if line.startswith("  ") and line.split()]
    names = [words[0] for words in lines]
    for command in ("eval", "compare", "full", "bench", "report", "fidelity", "agreement", "tune", "package", "public"):
        assert names.count(command) == 1, text
    public = " ".join(next(words for words in lines if words[0] == "public"))
    assert all(word in public for word in ("fetch", "list", "run", "report"))
    assert text.startswith("usage: gdn-harness [-h] SUBCOMMAND ...")


def test_public_fetch_from_a_file_says_it_is_not_a_folder(tmp_path, capsys):
    afile = tmp_path / "packed.json"
    afile.write_text("{}")
    assert main(["public", "fetch", "--from", str(afile), "--cache", str(tmp_path / "cache")]) == 2
    _one_error_line(capsys.readouterr().err, str(afile), "not a folder")
    assert "no such folder" not in capsys.readouterr().err


def test_report_of_a_folder_without_traces_of_the_definitions_names_what_it_holds(tmp_path, capsys):
    traces = tmp_path / "run" / "traces" / "me" / "gdn"
    traces.mkdir(parents=True)
    (traces / "gdn_mystery.jsonl").write_text("")
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert "holds no traces of gdn_decode_qk4_v8_d128_k_last, gdn_prefill_qk4_v8_d128_k_last" in err
    assert "its trace files are for gdn_mystery" in err


def test_compare_base_takes_what_solution_takes_and_one_per_definition(capsys):
    """`compare --solution ours --solution baseline --base flashinfer-gdn-decode` was refused (the prefill's solutions
    have other names), and `--base baseline`, the name --solution took, too."""
    from harness.cli import _compare_bases
    from harness.data.dataset import Dataset
    from harness.data.resolve import resolve
    ds = Dataset()
    plans = [(d, [], [s for arg in ("ours", "baseline") for s in resolve(arg, d, ds, strict=False)])
             for d in (ds.definition("gdn_decode_qk4_v8_d128_k_last"), ds.definition("gdn_prefill_qk4_v8_d128_k_last"))]
    decode, prefill = "gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"
    assert _compare_bases(ds, plans, ["baseline"]) == {decode: "flashinfer-gdn-decode",
                                                       prefill: "flashinfer-gdn-prefill"}
    assert _compare_bases(ds, plans, ["flashinfer-gdn-decode", "gdn-harness-prefill"]) == {
        decode: "flashinfer-gdn-decode", prefill: "gdn-harness-prefill"}
    assert _compare_bases(ds, plans, []) == {decode: "gdn-harness-decode", prefill: "gdn-harness-prefill"}
    assert _compare_bases(ds, plans, ["flashinfer-gdn-decode"])[prefill] == "gdn-harness-prefill"
    assert f"{prefill}: no --base names one of its solutions" in capsys.readouterr().out
    with pytest.raises(DataError, match="'fla' names none of the solutions compared"):
        _compare_bases(ds, plans, ["baseline", "fla"])


def test_small_messages_say_what_is_there(tmp_path, capsys):
    """A missing folder named to report was "no traces/ folder"; a decode kit named for the prefill did not say
    what it is for."""
    assert main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys.readouterr().err, "nope: no such folder")
    kit = Path(__file__).resolve().parent.parent / "examples" / "gdn_decode_qk4_v8_d128_k_last"
    assert main(["eval", "--solution", str(kit), "--definition", "gdn_prefill_qk4_v8_d128_k_last", "--device", "cpu",
                 "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys.readouterr().err, "holds no solution for definition 'gdn_prefill_qk4_v8_d128_k_last' "
                                             "(it holds gdn_decode_qk4_v8_d128_k_last)")
