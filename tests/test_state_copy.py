"""--state-copy: a device copy of each workload's state timed beside the solutions, and each solution's latency over it
per bucket in the comparison and the leaderboard."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from harness.cli import main
from harness.data.dataset import Dataset
from harness.eval.state_copy import copies_state, copy_latency_ms
from harness.eval.child import TimingConfig
from harness.report.leaderboard import write_leaderboard
from harness.report.state_copy import copy_ratios
from tests.toy import make_toy_root

REPO = Path(__file__).resolve().parent.parent
DECODE = "gdn_decode_qk4_v8_d128_k_last"
GPU, CUPTI = "NVIDIA H200", "cupti"


def _row(solution, uuid, batch, status, latency, source="run", hardware=GPU, timer=CUPTI):
    return {"solution": solution, "uuid": uuid, "axis_batch_size": batch, "status": status, "latency_us": latency,
            "source": source, "hardware": hardware, "timer": timer}


def _copy(uuid, us, source="run", hardware=GPU, timer=CUPTI):
    return {"source": source, "uuid": uuid, "copy_us": us, "copy_hardware": hardware, "copy_timer": timer}


def test_ratios_are_means_over_the_workloads_each_solution_passed():
    rows = pd.DataFrame([
        _row("a", "w1", 1, "PASSED", 2.0), _row("a", "w2", 1, "PASSED", 8.0), _row("a", "w3", 8, "PASSED", 9.0),
        _row("b", "w1", 1, "PASSED", 3.0), _row("b", "w2", 1, "INCORRECT_NUMERICAL", math.nan),
        _row("b", "w3", 8, "PASSED", 12.0)])
    copies = pd.DataFrame([_copy("w1", 1.0), _copy("w2", 2.0), _copy("w3", 6.0)])
    means, ratios = copy_ratios(rows, copies, ["b", "a"])
    assert means.to_dict("records") == [{"": "state copy (us)", "B=1": 1.5, "B=8": 6.0}]
    # a ratio of means, not a mean of ratios (a: (2 + 8) / 2 over (1 + 2) / 2, where the ratios' mean is 3);
    # b's failed w2 leaves both of its means: 3 / 1
    assert ratios.to_dict("records") == [{"solution": "b", "B=1": 3.0, "B=8": 2.0},
                                         {"solution": "a", "B=1": pytest.approx(10 / 3), "B=8": 1.5}]


def test_a_copy_from_another_gpu_timer_or_folder_is_not_a_floor():
    rows = pd.DataFrame([_row("a", "w1", 1, "PASSED", 2.0), _row("a", "w2", 1, "PASSED", 4.0, source="other"),
                         _row("a", "w3", 1, "PASSED", 6.0)])
    copies = pd.DataFrame([_copy("w1", 1.0, hardware="NVIDIA B200"), _copy("w2", 2.0),
                           _copy("w3", 3.0, timer="cuda-events")])
    means, ratios = copy_ratios(rows, copies, ["a"])
    assert list(means.columns) == [""] and list(ratios.columns) == ["solution"]   # nothing comparable


def test_only_a_definition_with_state_and_new_state_has_a_copy(tmp_path, capsys):
    assert copies_state(Dataset().definition(DECODE))
    assert copies_state(Dataset().definition("gdn_prefill_qk4_v8_d128_k_last"))
    root = make_toy_root(tmp_path / "toy")
    assert not copies_state(Dataset(root).definition("toy_axpy"))
    assert main(["eval", "--dataset", str(root), "--solution", "reference", "--device", "cpu", "--quiet",
                 "--state-copy", "--out", str(tmp_path / "out")]) == 2
    assert "--state-copy: toy_axpy reads no `state` input" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_copy_is_timed_on_the_workloads_state(monkeypatch):
    """Timed as a solution is: each timed call copies `state` into a fresh new_state; a timer that sees no work or
    another tensor would give nothing or fail. On the CPU the wall clock of a copy of 4 MiB is above zero."""
    ds = Dataset()
    decode = ds.definition(DECODE)
    w = ds.workloads(decode)[20]   # batch size 8: 8 x 8 x 128 x 128 fp32
    seen = []
    state = torch.randn(8, 8, 128, 128)
    real_copy = torch.Tensor.copy_

    def spy(dst, src, *a, **k):
        seen.append((dst.shape, src.data_ptr() == state.data_ptr()))
        return real_copy(dst, src, *a, **k)

    inputs = [torch.zeros(1)] * len(decode.inputs)
    inputs[list(decode.inputs).index("state")] = state
    monkeypatch.setattr(torch.Tensor, "copy_", spy)
    ms = copy_latency_ms(decode, w, inputs, TimingConfig(warmup=1, iters=3, trials=2), "cpu")
    assert ms > 0 and seen == [(torch.Size([8, 8, 128, 128]), True)] * (2 * (1 + 1 + 3))  # 2 trials: 1 + warmup + 3


def _extras(out):
    return [json.loads(x) for x in (out / "harness" / f"{DECODE}.jsonl").read_text().splitlines()]


def test_a_run_records_each_copy_once_and_the_reports_show_it(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["compare", "--solution", str(REPO / "examples" / DECODE), "--solution", "reference", "--definition", DECODE,
            "--device", "cpu", "--workloads", "0,20", "--quiet", "--no-reference-output-cache", "--state-copy",
            "--out", str(out)]
    assert main(argv) == 0
    assert "state copy (us) and each solution's latency over it:" in capsys.readouterr().out
    copies = [e for e in _extras(out) if e.get("record") == "state_copy"]
    assert sorted(e["workload"][:8] for e in copies) == ["25d1f606", "901e5104"]
    assert all(e["latency_ms"] > 0 and e["timing"] == "0/1/1" and e["inputs"] == "stand-in" for e in copies)
    md = (out / "compare" / f"{DECODE}.md").read_text()
    section = md[md.index("## Against a device copy of the state"):md.index("## Per workload")]
    assert "| state copy (us) |" in section and "| example-gdn-decode |" in section and "| reference |" in section
    assert main(argv) == 0                                        # resumed: every pair and copy is done
    assert len([e for e in _extras(out) if e.get("record") == "state_copy"]) == 2
    assert main(argv + ["--iterations", "2"]) == 0                # other settings: the copies are timed again
    assert len([e for e in _extras(out) if e.get("record") == "state_copy"]) == 4
    write_leaderboard(out, [Dataset().definition(DECODE)], ours=None)
    board = (out / "leaderboard" / f"{DECODE}.md").read_text()
    assert "## Against a device copy of the state" in board


def test_a_resumed_run_with_every_pair_done_times_only_the_copies(tmp_path):
    out = tmp_path / "out"
    argv = ["compare", "--solution", str(REPO / "examples" / DECODE), "--solution", "reference", "--definition", DECODE,
            "--device", "cpu", "--workloads", "0", "--quiet", "--no-reference-output-cache", "--out", str(out)]
    assert main(argv) == 0
    md = out / "compare" / f"{DECODE}.md"
    assert not [e for e in _extras(out) if e.get("record") == "state_copy"]
    assert "Against a device copy" not in md.read_text()
    pairs = len(_extras(out))
    assert main(argv + ["--state-copy"]) == 0
    assert [e["workload"][:8] for e in _extras(out)[pairs:]] == ["901e5104"]    # one copy line, no pair again
    assert "Against a device copy" in md.read_text()
