"""config.toml is read by table, key and type, and `make package` writes one kit per definition, only under --out,
files 0644: nothing the official packer would read differently is packed silently."""
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from harness.data.dataset import Dataset
from harness.data.jsonio import DataError
from harness.cli import main
from harness.build.package import package
from harness.data.starter_kit import load_starter_kit
from tests.toy import make_toy_root

REPO = Path(__file__).resolve().parent.parent
SOLUTION = '[solution]\nname = "{name}"\ndefinition = "toy_axpy"\nauthor = "kitter"\n'
BUILD = '[build]\nlanguage = "python"\nentry_point = "main.py::run"\n'
BODY = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"


def _kit(root, name="kit", solution_extra="", build_extra="", head=""):
    kit = root / name
    (kit / "solution" / "python").mkdir(parents=True)
    (kit / "config.toml").write_text(head + SOLUTION.format(name=name) + solution_extra + BUILD + build_extra)
    (kit / "solution" / "python" / "main.py").write_text(BODY)
    return kit


@pytest.mark.parametrize("where,extra,message", [
    ("build", 'destination_passing_style = "false"\n',
     r"\[build\] destination_passing_style must be a TOML boolean, got str 'false' "
     r"\(fix: destination_passing_style = false, with no quotes\)"),
    ("build", "destination_passing_style = 0\n",
     r"\[build\] destination_passing_style must be a TOML boolean, got int 0 "
     r"\(fix: destination_passing_style = true or false, with no quotes\)"),
    ("build", 'entry_pont = "main.py::run"\n',
     r"\[build\] unknown key \['entry_pont'\]; this harness refuses it, stricter than the official packer, which "
     r"ignores what it does not know \(fix: the keys of \[build\] are \['binding', 'dependencies', "
     r"'destination_passing_style', 'entry_point', 'language', 'source_dir', 'target_hardware'\]\)"),
    ("solution", 'descripton = "typo"\n', r"\[solution\] unknown key \['descripton'\]"),
    ("head", 'name = "at the top"\n', r"unknown table or top-level key \['name'\]; this harness refuses it"),
    ("build", '[tool]\nx = 1\n', r"unknown table or top-level key \['tool'\].*fix: config.toml has the tables "
                                 r"\[solution\] and \[build\] only"),
    ("build", 'dependencies = ["torch", 3]\n',
     r'\[build\] dependencies must hold strings only, got \[\'torch\', 3\] '
     r'\(fix: quote every element: dependencies = \["torch", "3"\]\)'),
    ("build", "target_hardware = 3\n", r"\[build\] target_hardware must be a list of strings, got int 3"),
    ("build", "binding = true\n", r"\[build\] binding must be a string, got bool True"),
    ("solution", "description = 5\n", r"\[solution\] description must be a string, got int 5"),
])
def test_bad_config_is_refused_naming_file_and_key(tmp_path, where, extra, message):
    kw = {"solution": {"solution_extra": extra}, "build": {"build_extra": extra}, "head": {"head": extra}}[where]
    kit = _kit(tmp_path, **kw)
    with pytest.raises(DataError, match=message) as exc:
        load_starter_kit(kit)
    assert exc.value.where == str(kit / "config.toml")


def test_a_string_for_a_list_is_one_element_and_said(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    kit = _kit(tmp_path / "sub", build_extra='target_hardware = "cuda"\ndependencies = "torch"\n')
    sol = load_starter_kit(kit)
    assert (sol.spec.target_hardware, sol.spec.dependencies) == (["cuda"], ["torch"])
    cfg = kit / "config.toml"
    assert sol.notes == [
        f'{cfg}: [build] target_hardware = "cuda" is a string, read as the one-element list ["cuda"] '
        "(write that to silence this)",
        f'{cfg}: [build] dependencies = "torch" is a string, read as the one-element list ["torch"] '
        "(write that to silence this)"]
    (path, packed, _), = package(tmp_path / "sub", tmp_path / "out", ds)
    assert json.loads(path.read_text())["spec"]["target_hardware"] == ["cuda"]
    assert packed.notes == sol.notes


def test_package_main_prints_the_notes(tmp_path, capsys):
    sub = tmp_path / "sub"
    shutil.copytree(REPO / "examples" / "gdn_decode_qk4_v8_d128_k_last", sub / "decode")
    cfg = sub / "decode" / "config.toml"
    cfg.write_text(cfg.read_text() + 'target_hardware = "cuda"\n')
    assert main(["package", "--submission", str(sub), "--out", str(tmp_path / "out")]) == 0
    assert (f'  warning: {cfg}: [build] target_hardware = "cuda" is a string, read as the one-element list '
            '["cuda"] (write that to silence this)\n') in capsys.readouterr().out


def test_unknown_definition_is_named(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    kit = _kit(tmp_path / "sub")
    cfg = kit / "config.toml"
    cfg.write_text(cfg.read_text().replace('"toy_axpy"', '"toy_axpyy"'))
    with pytest.raises(DataError) as exc:
        package(tmp_path / "sub", tmp_path / "out", ds)
    assert exc.value.where == str(cfg)
    assert exc.value.message == (f"[solution] definition: unknown definition 'toy_axpyy' (not in "
                                 f"{ds.root / 'definitions'})")
    assert exc.value.hint == "one of ['toy_axpy']"
    assert not (tmp_path / "out").exists()


def test_two_kits_for_one_definition_are_refused_naming_both(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    first, second = _kit(tmp_path / "sub", "a-kit"), _kit(tmp_path / "sub", "b-kit")
    with pytest.raises(DataError) as exc:
        package(tmp_path / "sub", tmp_path / "out", ds)
    assert exc.value.where == str(second / "config.toml")
    assert exc.value.message == (f"[solution] definition 'toy_axpy' is also packed from {first}; one kit per "
                                 "definition per run")
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_one_kit_folder_is_packaged_as_it_is(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    kit = _kit(tmp_path / "sub", "my-kit")
    (path, sol, _), = package(kit, tmp_path / "out", ds)
    assert path == tmp_path / "out" / "toy_axpy" / "solution.json" and sol.definition == "toy_axpy"


def test_a_missing_submission_folder_is_an_error_not_a_traceback(tmp_path, capsys):
    assert main(["package", "--submission", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    assert f"error: {tmp_path / 'nope'}: no such folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _repo_state():
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout


def test_packaging_writes_only_under_out_with_mode_0644(tmp_path):
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    sub, out = tmp_path / "sub", tmp_path / "out"
    for name in ("gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"):
        shutil.copytree(REPO / "examples" / name, sub / name)
    before = _repo_state()
    assert main(["package", "--submission", str(sub), "--out", str(out)]) == 0
    assert _repo_state() == before
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert [p.relative_to(out).as_posix() for p in files] == ["gdn_decode_qk4_v8_d128_k_last/solution.json",
                                                              "gdn_prefill_qk4_v8_d128_k_last/solution.json"]
    assert {stat.S_IMODE(os.stat(p).st_mode) for p in files} == {0o644}


def test_source_dir_is_read_as_the_official_packer_reads_it(tmp_path):
    from harness.data.starter_kit import load_starter_kit
    kit = tmp_path / "kit"
    shutil.copytree(REPO / "examples" / "gdn_decode_qk4_v8_d128_k_last", kit)
    (kit / "solution" / "python").rename(kit / "solution" / "v2")
    cfg = kit / "config.toml"
    cfg.write_text(cfg.read_text().replace('\n[build]\n', '\n[build]\nsource_dir = "v2"\n'))
    assert [s.path for s in load_starter_kit(kit).sources] == ["main.py"]


def test_where_the_starter_kit_packer_differs_it_is_said(tmp_path):
    from harness.build.package import kit_packer_differences
    ds = Dataset()
    (_, sol, notes), = package(REPO / "examples", tmp_path / "out", ds)[:1]
    assert any("description" in n for n in notes) and any("language 'python'" in n for n in notes)
    (_, ours, notes), = package(REPO / "submission", tmp_path / "out2", ds)[:1]
    assert notes == [] and kit_packer_differences(ours) == []


def test_a_linked_folder_in_the_sources_is_refused_not_left_out(tmp_path):
    """A symbolic link to a folder was skipped without a word (its files missing from the package); a linked file
    was already refused."""
    kit = _kit(tmp_path)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "util.py").write_text("SCALE = 1\n")
    (kit / "solution" / "python" / "lib").symlink_to(tmp_path / "lib", target_is_directory=True)
    with pytest.raises(DataError, match="symbolic links are not packed") as exc:
        load_starter_kit(kit)
    assert exc.value.where == str(kit / "solution" / "python" / "lib")


def test_sources_in_another_folder_than_the_language_say_how_to_name_it(tmp_path):
    kit = _kit(tmp_path)
    (kit / "solution" / "python").rename(kit / "solution" / "src")
    with pytest.raises(DataError, match=r"no source folder solution/python/ for language 'python'") as exc:
        load_starter_kit(kit)
    assert exc.value.hint == 'move the sources there, or name their folder with [build] source_dir = "src"'


def test_a_binary_source_file_says_what_to_do(tmp_path):
    kit = _kit(tmp_path)
    (kit / "solution" / "python" / "weights.bin").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(DataError, match="source file is not UTF-8 text") as exc:
        load_starter_kit(kit)
    assert "keep binary files out of the source folder" in exc.value.hint


def test_packaging_again_says_whether_it_replaced_the_earlier_file(tmp_path, capsys):
    kit = _kit(tmp_path / "sub")
    args = ["package", "--submission", str(kit), "--out", str(tmp_path / "out"), "--dataset",
            str(make_toy_root(tmp_path / "toy"))]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "(unchanged)" not in first and "(replaced" not in first
    assert main(args) == 0
    assert "solution.json (unchanged): kit" in capsys.readouterr().out
    (kit / "solution" / "python" / "main.py").write_text(BODY + "\n# edited\n")
    assert main(args) == 0
    assert "solution.json (replaced the earlier one): kit" in capsys.readouterr().out


@pytest.mark.parametrize("main_head, util, says", [
    ("from .util import f\n", "def f(x)\n    return x\n",
     "util.py:1: syntax error: expected ':' (the entry imports it)"),
    ("from util import f\n", "def f(x):\n    return x\n", "main.py:1 imports its own module 'util' as a top-level one"),
])
def test_a_source_the_entry_imports_is_checked_before_anything_is_written(tmp_path, main_head, util, says):
    kit = _kit(tmp_path)
    (kit / "solution" / "python" / "main.py").write_text(main_head + BODY)
    (kit / "solution" / "python" / "util.py").write_text(util)
    with pytest.raises(DataError, match=re.escape(says)):
        package(kit, tmp_path / "out", Dataset(make_toy_root(tmp_path / "toy")))
    assert not (tmp_path / "out").exists()
