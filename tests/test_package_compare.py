"""Packaging a starter-kit folder, and comparing solutions / merging reports on the toy dataset."""
import json
import shutil
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.data.dataset import Dataset
from harness.data.jsonio import DataError
from harness.build.package import package
from harness.data.solution import Solution
from tests.toy import make_toy_root, toy_solution

REPO = Path(__file__).resolve().parent.parent


def _kit(root, name="kit", entry="main.py::run", body="from .helpers.scale import times\n\n"
         "def run(x, y, alpha, z):\n    z.copy_(x + times(alpha, y))\n"):
    kit = root / name
    src = kit / "solution" / "python"
    (src / "helpers").mkdir(parents=True)
    (kit / "config.toml").write_text(
        f'[solution]\nname = "{name}"\ndefinition = "toy_axpy"\nauthor = "kitter"\n'
        f'[build]\nlanguage = "python"\nentry_point = "{entry}"\n')
    (src / "main.py").write_text(body)
    (src / "helpers" / "scale.py").write_text("def times(a, y):\n    return a * y\n")
    return kit


def test_package_keeps_subfolders_and_validates(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    sub = tmp_path / "submission"
    _kit(sub)
    (path, sol, differences), = package(sub, tmp_path / "out", ds)
    obj = json.loads(path.read_text())
    assert path == tmp_path / "out" / "toy_axpy" / "solution.json"
    assert {s["path"] for s in obj["sources"]} == {"main.py", "helpers/scale.py"}
    assert ("packed files in subfolders ['helpers/scale.py']; the starter kit's packer would have left them out"
            in differences)
    assert obj["spec"] == {"language": "python", "target_hardware": ["cuda"], "entry_point": "main.py::run",
                           "dependencies": [], "destination_passing_style": True, "binding": None}
    Solution.from_json(obj, path)  # a valid official Solution


def test_package_notes_a_module_not_installed_here_and_packs_all_the_same(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    sub = tmp_path / "submission"
    _kit(sub, body="import cutlass_magic_not_here\n\ndef run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n")
    (path, _, notes), = package(sub, tmp_path / "out", ds)
    assert path.exists()
    assert ("imports cutlass_magic_not_here, which cannot be imported here: the evaluator's machine must have them "
            "(an eval here gives COMPILE_ERROR)") in notes


@pytest.mark.parametrize("entry,body,needle", [
    ("main.py::run", "def run(x, y, z):\n    pass\n", "Destination-passing style callable: expected 4 positional "
                                                     "parameters .3 inputs . 1 outputs., but 'run' takes 3 required"),
    ("main.py::nope", "def run(x, y, alpha, z):\n    pass\n", "'nope' is not defined in main.py \\(it defines: run\\)"),
    ("other.py::run", "def run(x, y, alpha, z):\n    pass\n", "entry point file 'other.py' is not among"),
    ("main.py::run", "def run(x, y, alpha, z)\n    pass\n", "syntax error"),
])
def test_package_refuses_bad_entry_points(tmp_path, entry, body, needle):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    sub = tmp_path / "submission"
    _kit(sub, entry=entry, body=body)
    with pytest.raises(DataError, match=needle):
        package(sub, tmp_path / "out", ds)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_packed_json_gets_the_same_verdicts_as_its_folder(tmp_path, capsys):
    root = make_toy_root(tmp_path / "toy")
    sub = tmp_path / "submission"
    kit = _kit(sub)
    (path, _, _), = package(sub, tmp_path / "pk", Dataset(root))
    common = ["--dataset", str(root), "--definition", "toy_axpy", "--device", "cpu", "--quiet",
              "--iterations", "1", "--warmup", "0"]
    assert main(["eval", *common, "--solution", str(kit), "--out", str(tmp_path / "a")]) == 0
    assert main(["eval", *common, "--solution", str(path), "--out", str(tmp_path / "b")]) == 0
    verdicts = []
    for out in ("a", "b"):
        lines = (tmp_path / out / "traces" / "kitter" / "toy" / "toy_axpy.jsonl").read_text().splitlines()
        verdicts.append({(t["workload"]["uuid"], t["evaluation"]["status"]) for t in map(json.loads, lines)})
    assert verdicts[0] == verdicts[1] and len(verdicts[0]) == 3
    assert {v for _, v in verdicts[0]} == {"PASSED"}


def test_repo_submission_packages():
    out = REPO / ".cache" / "test-package"
    shutil.rmtree(out, ignore_errors=True)
    written = package(out=out)
    assert {sol.definition for _, sol, _ in written} == {"gdn_decode_qk4_v8_d128_k_last",
                                                         "gdn_prefill_qk4_v8_d128_k_last"}


def test_package_writes_into_the_current_folder_as_eval_and_compare_do(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["package"]) == 0
    assert {p.parent.name for p in (tmp_path / "results" / "package").glob("*/solution.json")} == {
        "gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"}


def test_compare_and_report(tmp_path, capsys):
    root = make_toy_root(tmp_path / "toy")
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps(toy_solution("fast", "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n")))
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(toy_solution("slow", "import time\ndef run(x, y, alpha, z):\n    time.sleep(0.01)\n"
                                                    "    z.copy_(x + alpha * y)\n")))
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(toy_solution("broken", "def run(x, y, alpha, z):\n    raise ValueError('no')\n")))
    out = tmp_path / "cmp"
    rc = main(["compare", "--dataset", str(root), "--definition", "toy_axpy", "--device", "cpu", "--quiet",
               "--iterations", "3", "--warmup", "0", "--out", str(out), "--base", "fast", "--solution", str(fast),
               "--solution", str(slow), "--solution", str(broken)])
    assert rc == 1      # broken's pairs are not PASSED
    printed = capsys.readouterr().out
    assert "RUNTIME_ERROR: broken on" in printed and "ValueError: no" in printed
    assert "these latencies and ratios say nothing about the solutions' speed on a GPU" in printed
    text = (out / "compare" / "toy_axpy.md").read_text()
    assert "slow / fast" in text and "wins vs fast" in text
    assert "| broken | False | 0 | 3 |" in text  # failed everywhere: still listed, gated
    assert "All solutions ran in one run" in text
    import pandas as pd
    wide = pd.read_csv(out / "compare" / "toy_axpy.csv")
    assert (wide["slow / fast"] > 5).all()  # 10 ms of sleep against microseconds
    rc = main(["report", str(out), "--dataset", str(root), "--definition", "toy_axpy", "--out", str(tmp_path / "rep"),
               "--base", "slow", "--base", "not-in-these-traces"])
    assert rc == 0 and (tmp_path / "rep" / "report" / "report.md").exists()
    assert "fast / slow" in (tmp_path / "rep" / "compare" / "toy_axpy.md").read_text()
    summary = pd.read_csv(tmp_path / "rep" / "report" / "summary.csv")
    per_workload = pd.read_csv(tmp_path / "rep" / "report" / "toy_axpy.csv")
    buckets = pd.read_csv(tmp_path / "rep" / "compare" / "toy_axpy_buckets.csv")
    assert all(f"torch {torch.__version__}" in text for text in [*summary.provenance, *buckets.provenance])
    timers = summary.set_index("solution").timer
    assert timers["broken"] == "-" and timers["fast"] == "cpu-wall-clock (not official)"  # only timed rows count
    assert all(json.loads(libs)["torch"] == torch.__version__ for libs in per_workload.libs)


def _three_alike(tmp_path):
    """The toy dataset and three solution JSONs a, b, c of the same code."""
    paths = {}
    for name in ("a", "b", "c"):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(toy_solution(name, "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n")))
    return make_toy_root(tmp_path / "toy"), paths


def test_compare_reports_its_own_pairs_in_a_folder_holding_earlier_runs(tmp_path, capsys):
    import pandas as pd
    root, paths = _three_alike(tmp_path)
    common = ["compare", "--dataset", str(root), "--definition", "toy_axpy", "--device", "cpu", "--quiet",
              "--iterations", "1", "--warmup", "0", "--out", str(tmp_path / "cmp")]
    assert main([*common, "--workloads", "0", "--solution", str(paths["a"]), "--solution", str(paths["b"])]) == 0
    assert main([*common, "--workloads", "1-2", "--solution", str(paths["a"]), "--solution", str(paths["c"])]) == 0
    wide = pd.read_csv(tmp_path / "cmp" / "compare" / "toy_axpy.csv")
    assert len(wide) == 2 and "b" not in wide.columns and {"a", "c", "c / a"} <= set(wide.columns)
    summary = capsys.readouterr().out.split("solution  all_pass")[-1].split("bucket  workloads")[0]
    assert [line.split()[0] for line in summary.strip().splitlines()[1:]] == ["a", "c"]   # the second command's


def test_a_one_workload_compare_is_one_run_and_two_compares_are_two(tmp_path, capsys):
    """With one workload each solution has one trace, so no two trace spans overlap: the report said the solutions came
    from 2 runs. The run each pair's extras line names tells it."""
    root, paths = _three_alike(tmp_path)
    common = ["compare", "--dataset", str(root), "--definition", "toy_axpy", "--device", "cpu", "--quiet",
              "--iterations", "1", "--warmup", "0", "--workloads", "0"]
    assert main([*common, "--out", str(tmp_path / "one"), "--solution", str(paths["a"]),
                 "--solution", str(paths["b"])]) == 0
    assert "All solutions ran in one run" in (tmp_path / "one" / "compare" / "toy_axpy.md").read_text()
    assert main([*common, "--out", str(tmp_path / "two"), "--solution", str(paths["c"]),
                 "--solution", str(paths["b"])]) == 0
    assert main(["report", str(tmp_path / "one"), str(tmp_path / "two"), "--dataset", str(root), "--definition",
                 "toy_axpy", "--out", str(tmp_path / "rep"), "--base", "a"]) == 0
    text = (tmp_path / "rep" / "compare" / "toy_axpy.md").read_text()
    assert "come from 2 runs" in text, text


@pytest.mark.parametrize("extra, needle", [([], "name at least two solutions"),
                                            (["--solution", "SECOND", "--base", "nope"],
                                             "'nope' names none of the solutions compared")])
def test_compare_refuses_before_any_pair_runs(tmp_path, capsys, extra, needle):
    """A comparison that cannot be reported (one solution, or a --base not among them) is refused before any pair
    is evaluated: nothing is written."""
    root = make_toy_root(tmp_path / "toy")
    sols = []
    for name in ("a", "b"):
        sols.append(tmp_path / f"{name}.json")
        sols[-1].write_text(json.dumps(toy_solution(name, "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n")))
    out = tmp_path / "cmp"
    args = ["compare", "--dataset", str(root), "--definition", "toy_axpy", "--device", "cpu", "--quiet", "--out",
            str(out), "--solution", str(sols[0]), *[str(sols[1]) if a == "SECOND" else a for a in extra]]
    assert main(args) == 2
    assert needle in capsys.readouterr().err
    assert not out.exists()


def test_report_refuses_mixed_timers(tmp_path, capsys):
    root = make_toy_root(tmp_path / "toy")
    sol = tmp_path / "s.json"
    sol.write_text(json.dumps(toy_solution("s", "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n")))
    base = ["eval", "--dataset", str(root), "--definition", "toy_axpy", "--device", "cpu", "--quiet",
            "--iterations", "1", "--solution", str(sol)]
    assert main([*base, "--out", str(tmp_path / "r1")]) == 0
    assert main([*base, "--out", str(tmp_path / "r2")]) == 0
    extras = tmp_path / "r2" / "harness" / "toy_axpy.jsonl"
    extras.write_text(extras.read_text().replace("cpu-wall-clock (not official)", "cupti (other machine)"))
    args = ["report", str(tmp_path / "r1"), str(tmp_path / "r2"), "--dataset", str(root), "--definition", "toy_axpy",
            "--out", str(tmp_path / "m")]
    assert main(args) == 2 and "different timers" in capsys.readouterr().err
    assert main([*args, "--allow-mixed-timers"]) == 0


def test_the_ablation_is_our_prefill_submission_with_the_recurrent_entry_point():
    from harness.data.resolve import ABLATION, resolve
    ds = Dataset()
    prefill = ds.definition(ABLATION["definition"])
    (ours,), (ablation,) = resolve("ours", prefill, ds), resolve("ablation", prefill, ds)
    assert ablation.name == ABLATION["name"] and ablation.spec.entry_point == "kernel.py::kernel_recurrent"
    assert ablation.sources == ours.sources and ablation.author == "gdn-harness"
    assert resolve("ablation", ds.definition("gdn_decode_qk4_v8_d128_k_last"), ds) == []
    # our author names both ours and the ablation: refused, with the two names to use
    with pytest.raises(DataError, match="name ours .* or ablation"):
        resolve("gdn-harness", prefill, ds)


def test_solution_runs_groups_overlapping_spans_of_one_commit():
    import pandas as pd

    from harness.report.compare import solution_runs

    lib = lambda c: json.dumps({"harness": c})  # noqa: E731
    df = pd.DataFrame([
        {"solution": "a", "libs": lib("x"), "timestamp": "2026-01-01T10:00"},
        {"solution": "a", "libs": lib("x"), "timestamp": "2026-01-01T10:05"},
        {"solution": "b", "libs": lib("x"), "timestamp": "2026-01-01T10:02"},
        {"solution": "c", "libs": lib("x"), "timestamp": "2026-01-01T11:00"},   # later: another run
        {"solution": "d", "libs": lib("y"), "timestamp": "2026-01-01T10:03"},   # overlapping, other commit
    ])
    runs = solution_runs(df).set_index("solution").run
    assert runs["a"] == runs["b"] and len({runs["a"], runs["c"], runs["d"]}) == 3
