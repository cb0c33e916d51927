"""FlashInfer-Bench's own benchmark beside the harness, on the same solutions and inputs (`gdn-harness fidelity
--solution ...`, a GPU): per definition, chunk by chunk of workloads, the harness, then FlashInfer-Bench (FIB), then
(with --harness-again) the harness again, then FIB again, so drift over the run hits all of them; then the fidelity
report (harness/report/fidelity.py).

FIB is imported from where the user has it (`--fib-src DIR` or installed); the project never vendors it. It reads a
dataset root of its own: <out>/fib and <out>/fib-again each hold copies of definitions/ and workloads/, the given
solutions as JSON at solutions/<author>/<op_type>/<definition>/<name>.json, and blob/ with links to the dataset's
safetensors files, stand-ins included (the harness writes those when it prepares a workload; a chunk it skips on
resume gets them written before FIB's turn). FIB appends its traces to traces/<author>/<op_type>/<definition>.jsonl,
the harness's layout. The FIB settings are the contest's (its EVALUATION.md): timeout 300 s, the prefill at 1/5/3,
FIB's defaults otherwise; its isolated runner (--use-isolated-runner, what the contest used) or its persistent one."""
import importlib
import json
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from harness.data.jsonio import DataError

CONTEST_COMMON = {"timeout_seconds": 300}
CONTEST_FLAGS = {"gdn_prefill_qk4_v8_d128_k_last": {"warmup_runs": 1, "iterations": 5, "num_trials": 3}}
# the harness mode that matches each FIB runner: a fresh process per pair, or one persistent child per solution
ISOLATION_OF_RUNNER = {"isolated": "process", "persistent": "worker"}
CHUNK = 10   # workloads per turn of each run
# each run's folder under --out, as the progress line names it
TURN_NAMES = {"harness": "harness", "fib": "FlashInfer-Bench", "harness-again": "harness again",
              "fib-again": "FlashInfer-Bench again"}


@dataclass(frozen=True)
class FibPlan:
    runner: str              # "isolated" (the contest's) or "persistent"
    profile_reference: bool  # time the reference too (slow: minutes per decode workload under CUPTI)


class Fib:
    """FIB's Benchmark, imported from `src` (a folder holding flashinfer_bench/) or the environment, run as `plan`
    says; a DataError that says how to get it when it is not importable."""

    def __init__(self, src, plan):
        if src:
            if not (Path(src) / "flashinfer_bench").is_dir():
                raise DataError("--fib-src", f"{src} holds no flashinfer_bench/ folder")
            sys.path.insert(0, str(Path(src).resolve()))
        try:
            self.bench = importlib.import_module("flashinfer_bench.bench")
            self.data = importlib.import_module("flashinfer_bench.data")
        except ImportError as exc:
            raise DataError("fidelity", f"FlashInfer-Bench is not importable ({exc})",
                            "pass --fib-src DIR (a checkout of its repository) or pip install flashinfer-bench") \
                from None
        self.plan = plan

    def config(self, definition, solutions):
        """The contest's settings for one definition, built as FIB's CLI builds them (defaults + top-level flags)."""
        overrides = {"use_isolated_runner": self.plan.runner == "isolated", "definitions": [definition.name],
                     "solutions": [s.name for s in solutions], **CONTEST_COMMON,
                     **CONTEST_FLAGS.get(definition.name, {})}
        if not self.plan.profile_reference:
            overrides["profile_baseline"] = False
        return self.bench.BenchmarkConfig.default(**overrides)

    def run(self, root, dataset, definition, solutions, workloads):
        """FIB's Benchmark on `workloads` of `definition` in dataset root `root`; it writes the traces itself."""
        link_blobs(root, dataset)
        ts = self.data.TraceSet.from_path(str(root))
        wanted = {w.uuid for w in workloads}
        ts.workloads[definition.name] = [t for t in ts.workloads[definition.name] if t.workload.uuid in wanted]
        bench = self.bench.Benchmark(ts, self.config(definition, solutions))
        try:
            bench.run_all(dump_traces=True, resume=True)
        finally:
            bench.close()


def write_missing_blobs(dataset, definition, workloads, opts):
    """The stand-in files of `workloads` that are not there yet. The harness writes them when it prepares a
    workload, but a resumed chunk whose pairs are all traced prepares nothing, and FIB would then fail those
    workloads for a missing file. Stand-ins are deterministic, so these are the bytes the earlier run used."""
    from harness.eval.inputs import BlobFault, load_blobs

    for workload in workloads:
        try:
            load_blobs(dataset, definition, workload, synthesize=opts.synthesize)
        except BlobFault:
            pass  # a faulty real file: FIB meets the same fault and fails the workload, as the harness did


def lay_out_root(root, dataset, definition, solutions):
    """`root` as FIB's dataset root for `definition` (see the module doc); solutions placed afresh each time."""
    root = Path(root)
    for sub in ("definitions", "workloads"):
        shutil.rmtree(root / sub, ignore_errors=True)
        shutil.copytree(dataset.root / sub, root / sub)
    shutil.rmtree(root / "solutions" / definition.name, ignore_errors=True)
    for sol in solutions:
        dest = root / "solutions" / sol.author / definition.op_type / definition.name / f"{sol.name}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(sol.to_json(), indent=2), encoding="utf-8")
    link_blobs(root, dataset)


def link_blobs(root, dataset):
    """One symbolic link per safetensors file of the dataset (new stand-ins appear as the harness writes them)."""
    src = dataset.root / "blob"
    for p in src.rglob("*.safetensors") if src.is_dir() else []:
        dest = Path(root) / "blob" / p.relative_to(src)
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(p.resolve())


def as_runner(opts, runner):
    """The harness's options with the isolation of FlashInfer-Bench's `runner`, so that both tools run alike."""
    return replace(opts, isolation=ISOLATION_OF_RUNNER[runner])


def run_fidelity(dataset, plans, opts_of, out, fib, harness_again=False):
    """The runs, chunk by chunk: `plans` [(definition, workloads, solutions)], `opts_of(definition, folder)`: the
    harness's EvalOptions for it, `fib` a Fib. Returns the folders (harness, fib, fib-again), and harness-again last
    with `harness_again`: the harness a second time, between the two FIB runs, so that each tool's pair of runs is
    as far apart in time as the other's."""
    from harness.eval.console import run_definition

    out = Path(out)
    folders = out / "harness", out / "fib", out / "fib-again"
    if harness_again:
        folders += (out / "harness-again",)
    for definition, workloads, solutions in plans:
        for root in folders[1:3]:
            lay_out_root(root, dataset, definition, solutions)
        opts = {h: as_runner(opts_of(definition, h), fib.plan.runner) for h in (folders[0], *folders[3:])}
        turns = (folders[0], folders[1], *folders[3:], folders[2])
        for k in range(0, len(workloads), CHUNK):
            chunk = workloads[k:k + CHUNK]
            print(f"{definition.name}: workloads {k + 1}-{k + len(chunk)} of {len(workloads)}: "
                  + ", ".join(TURN_NAMES[f.name] for f in turns) + f" (FlashInfer-Bench's {fib.plan.runner} "
                  "runner)")
            for folder in turns:
                if folder in opts:
                    run_definition(dataset, definition, chunk, solutions, opts[folder], table=False)
                    if folder == folders[0]:   # FIB's turn comes next
                        write_missing_blobs(dataset, definition, chunk, opts[folder])
                else:
                    fib.run(folder, dataset, definition, solutions, chunk)
    return folders
