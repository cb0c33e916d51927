"""Packing round trip: every example kit and our submission, packed into solution.json, loaded back and evaluated
on the CPU, gets the same verdict on every workload as its folder, and the packed JSON holds what the folder holds."""
from pathlib import Path

import pytest

from harness.data.dataset import Dataset
from harness.eval.options import EvalOptions
from harness.eval.loop import evaluate
from harness.build.package import package
from harness.eval.child import TimingConfig
from harness.data.solution import Solution
from harness.data.starter_kit import load_starter_kit

REPO = Path(__file__).resolve().parent.parent
SMALLEST = {"gdn_decode_qk4_v8_d128_k_last": "901e5104", "gdn_prefill_qk4_v8_d128_k_last": "77daf91d"}


def _statuses(ds, solution, tmp, tag):
    d = ds.definition(solution.definition)
    workloads = [w for w in ds.workloads(d) if w.uuid.startswith(SMALLEST[d.name])]
    opts = EvalOptions(device="cpu", out_dir=tmp / tag, timing=TimingConfig(0, 1, 1), isolation="worker",
                       show_progress=False, profile_baseline=False, reference_cache=tmp / "ref.json")
    results = evaluate(ds, d, workloads, [solution], opts)
    return [(r.workload.uuid, r.trace.evaluation.status.value, r.trace.evaluation.correctness) for r in results]


@pytest.mark.parametrize("folder", ["examples", "submission"])
def test_packed_solutions_read_and_evaluate_as_their_folders(tmp_path, folder):
    ds = Dataset()
    written = package(REPO / folder, tmp_path / "packed", ds)
    assert sorted(sol.definition for _, sol, _ in written) == sorted(SMALLEST)
    for path, _, _ in written:
        packed = Solution.load(path)
        kit = load_starter_kit(REPO / folder / packed.definition)
        assert packed.to_json() == kit.to_json()
        from_kit = _statuses(ds, kit, tmp_path, f"kit-{packed.definition}")
        from_json = _statuses(ds, packed, tmp_path, f"json-{packed.definition}")
        assert from_kit == from_json and {s for _, s, _ in from_kit} == {"PASSED"}
