"""`gdn-harness fidelity --solution ...` (harness/fib.py): the harness and FlashInfer-Bench (FIB) twice, chunk by chunk,
on one dataset. FIB itself needs a GPU, so a stand-in package with FIB's API (Benchmark, BenchmarkConfig, TraceSet)
plays it here: it checks what FIB would read (its dataset root, the blobs, the settings) and writes traces where
FIB writes them."""
import json
import shutil
import textwrap

import pytest

import harness.cli
import harness.eval.console
import harness.fib
from harness.cli import main
from harness.data.dataset import Dataset, read_traces
from harness.eval.child import TimingConfig
from harness.eval.options import EvalOptions
from harness.fib import Fib, FibPlan, run_fidelity
from harness.report.fidelity import FIDELITY_NAMES, Runs, write_agreement
from harness.data.solution import Solution
from tests.toy import make_toy_root, toy_solution

FAKE_BENCH = '''
import json, pathlib
LOG = []
class BenchmarkConfig:
    def __init__(self, **kw): self.__dict__.update(kw)
    @classmethod
    def default(cls, **kw): return cls(**kw)
class Benchmark:
    def __init__(self, ts, config): self.ts, self.config = ts, config
    def run_all(self, dump_traces, resume):
        root = pathlib.Path(self.ts.root)
        for d in self.config.definitions:
            for t in self.ts.workloads[d]:
                for spec in t.workload["inputs"].values():   # FIB skips a workload whose blob is missing
                    if spec["type"] == "safetensors":
                        assert (root / spec["path"]).exists(), spec["path"]
                LOG.append((root.name, d, t.workload["uuid"], self.config.use_isolated_runner,
                            self.config.timeout_seconds, getattr(self.config, "profile_baseline", True)))
                for name in self.config.solutions:
                    sol = json.loads(next(root.glob(f"solutions/*/*/{d}/{name}.json")).read_text())
                    out = root / "traces" / sol["author"] / "toy" / f"{d}.jsonl"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    ev = {"status": "PASSED", "environment": {"hardware": "cpu", "libs": {}}, "timestamp": "t",
                          "log": "", "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
                          "performance": {"latency_ms": 1.0, "reference_latency_ms": 0.0, "speedup_factor": 0.0}}
                    with open(out, "a") as f:
                        f.write(json.dumps({"definition": d, "solution": name, "workload": t.workload,
                                            "evaluation": ev}) + "\\n")
    def close(self): pass
'''
FAKE_DATA = '''
import json, pathlib, types
class Workload(dict):   # FIB's Workload model: .uuid, and (here) its JSON as a dict
    uuid = property(lambda self: self["uuid"])
class TraceSet:
    @classmethod
    def from_path(cls, root):
        ts = cls(); ts.root = root; ts.workloads = {}
        for p in pathlib.Path(root).glob("workloads/*/*.jsonl"):
            rows = [json.loads(x) for x in p.read_text().splitlines() if x]
            ts.workloads[rows[0]["definition"]] = [types.SimpleNamespace(workload=Workload(r["workload"]))
                                                for r in rows]
        return ts
'''


def _fake_fib(tmp_path):
    pkg = tmp_path / "fibsrc" / "flashinfer_bench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "bench.py").write_text(textwrap.dedent(FAKE_BENCH))
    (pkg / "data.py").write_text(textwrap.dedent(FAKE_DATA))
    return pkg.parent


def _toy_fidelity(tmp_path, runner):
    """The toy dataset, its definition and workloads, one correct solution, and the fake FIB with `runner`."""
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    toy = ds.definition("toy_axpy")
    sols = [Solution.from_json(toy_solution("good", "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"),
                               "good")]
    return ds, toy, ds.workloads(toy), sols, Fib(str(_fake_fib(tmp_path)), FibPlan(runner, profile_reference=False))


def _cpu_opts(definition, folder):
    return EvalOptions(device="cpu", out_dir=folder, timing=TimingConfig(0, 1, 1), show_progress=False,
                       profile_baseline=False, resume=True)


def test_both_tools_run_chunk_by_chunk_on_the_same_inputs(tmp_path, monkeypatch):
    ds, toy, workloads, sols, fib = _toy_fidelity(tmp_path, "isolated")
    order = []
    real = harness.eval.console.run_definition
    monkeypatch.setattr(harness.eval.console, "run_definition", lambda ds_, d, w, s, opts, table=True: order.append(
        ("harness", [x.uuid for x in w], opts.isolation)) or real(ds_, d, w, s, opts, table=table))
    monkeypatch.setattr(harness.fib, "CHUNK", 2)
    folders = run_fidelity(ds, [(toy, workloads, sols)], _cpu_opts, tmp_path / "out", fib)
    log = fib.bench.LOG
    uuids = [w.uuid for w in workloads]   # w-random, w-blob, w-standin: chunks of 2 and 1
    assert [(r[0], r[2]) for r in log] == [("fib", uuids[0]), ("fib", uuids[1]), ("fib-again", uuids[0]),
                                           ("fib-again", uuids[1]), ("fib", uuids[2]), ("fib-again", uuids[2])]
    assert all(r[3] is True and r[4] == 300 and r[5] is False for r in log)   # the contest's runner and timeout
    assert order == [("harness", uuids[:2], "process"), ("harness", uuids[2:], "process")]
    # w-standin's blob is a stand-in the harness wrote; FIB read it through its link (the fake asserts it)
    link = tmp_path / "out" / "fib" / "blob" / "toy" / "missing.safetensors"
    assert link.is_symlink() and link.resolve() == (ds.root / "blob" / "toy" / "missing.safetensors").resolve()
    placed = tmp_path / "out" / "fib" / "solutions" / "tester" / "toy" / "toy_axpy" / "good.json"
    assert json.loads(placed.read_text())["name"] == "good"
    table, lone = write_agreement(tmp_path / "report", [toy], Runs(*map(str, folders)), FIDELITY_NAMES, "fidelity")
    assert lone == 0 and table.iloc[0].pairs == 3 and table.iloc[0].verdicts_equal == 3
    assert len(read_traces(tmp_path / "out" / "harness" / "traces" / "tester" / "toy" / "toy_axpy.jsonl")) == 3


def test_the_harness_again_runs_between_the_two_fib_runs(tmp_path, monkeypatch):
    """With harness_again each tool's two runs of a chunk are two turns apart: harness, FIB, harness, FIB."""
    ds, toy, workloads, sols, fib = _toy_fidelity(tmp_path, "persistent")
    turns = fib.bench.LOG   # the fake FIB logs its dataset root's name per workload; the harness its folder's
    turns.clear()           # (the fake is imported once per session: earlier tests' entries)
    real = harness.eval.console.run_definition
    monkeypatch.setattr(harness.eval.console, "run_definition", lambda ds_, d, w, s, opts, table=True: turns.append(
        (opts.out_dir.name, opts.isolation)) or real(ds_, d, w, s, opts, table=table))
    monkeypatch.setattr(harness.fib, "CHUNK", 2)
    folders = run_fidelity(ds, [(toy, workloads, sols)], _cpu_opts, tmp_path / "out", fib, harness_again=True)
    assert [f.name for f in folders] == ["harness", "fib", "fib-again", "harness-again"]
    chunk = ["harness", "fib", "fib", "harness-again", "fib-again", "fib-again"]   # FIB: one entry per workload
    assert [t[0] for t in turns] == chunk + ["harness", "fib", "harness-again", "fib-again"]
    assert {t[1] for t in turns if t[0].startswith("harness")} == {"worker"}
    for run in ("harness", "harness-again"):
        assert len(read_traces(tmp_path / "out" / run / "traces" / "tester" / "toy" / "toy_axpy.jsonl")) == 3


def test_fidelity_with_the_harness_again_also_sets_fib_against_the_harness_spread(tmp_path, monkeypatch, capsys):
    ds, toy, workloads, sols, fib = _toy_fidelity(tmp_path, "persistent")
    folders = run_fidelity(ds, [(toy, workloads, sols)], _cpu_opts, tmp_path / "out", fib, harness_again=True)
    monkeypatch.setattr(harness.cli, "_run_fidelity", lambda args: folders)
    assert main(["fidelity", "--solution", "any", "--dataset", str(ds.root), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "fidelity_harness_noise.md").read_text()
    assert md.startswith("# FlashInfer-Bench against the harness, with the harness's own spread")
    assert f"harness again (noise floor): `{folders[3]}`" in md
    assert (tmp_path / "rep" / "fidelity.md").exists()


def test_the_harness_again_is_refused_when_pairing_finished_runs(tmp_path, capsys):
    assert main(["fidelity", "--harness", str(tmp_path), "--fib", str(tmp_path), "--harness-again",
                 "--out", str(tmp_path / "o")]) == 2
    assert "gdn-harness agreement --run FIB --against HARNESS --again HARNESS-AGAIN" in capsys.readouterr().err


def test_a_resumed_chunk_the_harness_skips_still_gets_its_stand_ins_for_fib(tmp_path):
    # the first run's folder resumed on a fresh machine: every harness pair traced, no stand-in file yet, and FIB
    # still to run (its fake fails a workload whose blob file is missing, as FIB does)
    ds, toy, workloads, sols, fib = _toy_fidelity(tmp_path, "persistent")
    run_fidelity(ds, [(toy, workloads, sols)], _cpu_opts, tmp_path / "out", fib)
    blob = ds.root / "blob" / "toy" / "missing.safetensors"
    first_bytes = blob.read_bytes()
    blob.unlink()
    for run in ("fib", "fib-again"):
        shutil.rmtree(tmp_path / "out" / run)
    before = len(fib.bench.LOG)
    run_fidelity(ds, [(toy, workloads, sols)], _cpu_opts, tmp_path / "out", fib)
    assert sorted((r[0], r[2]) for r in fib.bench.LOG[before:]) == sorted(
        (run, w.uuid) for run in ("fib", "fib-again") for w in workloads)
    assert blob.read_bytes() == first_bytes   # the stand-in the harness's traces were made on
    assert len(read_traces(tmp_path / "out" / "harness" / "traces" / "tester" / "toy" / "toy_axpy.jsonl")) == 3


@pytest.mark.parametrize("runner, isolation", [("isolated", "process"), ("persistent", "worker")])
def test_fidelity_prints_the_differences_of_the_isolation_it_runs(tmp_path, monkeypatch, capsys, runner, isolation):
    # the printed list came from --isolation (default worker) while the isolated runner's turn ran in process mode
    import harness.eval.options
    ds, *_ = _toy_fidelity(tmp_path, runner)
    printed, ran = [], []
    monkeypatch.setattr(harness.cli, "device_of", lambda args: "cuda")
    monkeypatch.setattr(harness.eval.options, "print_differences", lambda *opts: printed.extend(opts))
    monkeypatch.setattr(harness.fib, "run_fidelity", lambda dataset, plans, opts_of, out, fib, again: ran.append(
        opts_of(plans[0][0], tmp_path / "h")) or [tmp_path / n for n in ("h", "f", "g")])
    monkeypatch.setattr(harness.cli, "_write_agreement", lambda *a: None)
    argv = ["fidelity", "--solution", str(tmp_path / "good.json"), "--dataset", str(ds.root), "--fib-src",
            str(tmp_path / "fibsrc"), "--runner", runner, "--prestart", "2", "--out", str(tmp_path / "o")]
    (tmp_path / "good.json").write_text(json.dumps(toy_solution("good", "def run(x, y, alpha, z):\n    pass\n")))
    assert main(argv) == 0
    assert [o.isolation for o in printed] == [isolation] and ran[0].isolation == isolation
    notes = harness.eval.options.differences(printed[0])
    assert any("2 spare children start beside the timed calls" in n for n in notes) == (runner == "isolated")
    assert any("each solution runs in one persistent child" in n for n in notes) == (runner == "persistent")
    assert main([*argv, "--isolation", "none"]) == 0
    assert "--isolation none has no effect with fidelity" in capsys.readouterr().err


def test_fidelity_run_needs_flashinfer_bench_and_a_gpu(tmp_path, capsys):
    assert main(["fidelity", "--solution", "ours", "--out", str(tmp_path / "o"), "--device", "cpu"]) == 2
    assert "need a GPU" in capsys.readouterr().err
    assert main(["fidelity", "--solution", "ours", "--harness", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["fidelity", "--out", str(tmp_path / "o")]) == 2
    with pytest.raises(Exception):
        Fib(str(tmp_path), FibPlan("isolated", False))   # no flashinfer_bench/ there
