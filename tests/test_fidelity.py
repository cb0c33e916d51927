"""The fidelity report (harness/report/fidelity.py) on hand-made trace folders: one run of the harness, two of
FlashInfer-Bench; every figure worked out by hand."""
import json

from harness.cli import main

DEF = "gdn_decode_qk4_v8_d128_k_last"


def _trace(uuid, batch, status, latency_ms=None, max_abs=0.001):
    ev = {"status": status, "environment": {"hardware": "NVIDIA H200", "libs": {}}, "timestamp": "2026-12-02T00:00:00",
          "log": "", "correctness": {"max_relative_error": 0.01, "max_absolute_error": max_abs}
          if status in ("PASSED", "INCORRECT_NUMERICAL") else None,
          "performance": {"latency_ms": latency_ms, "reference_latency_ms": 0.0, "speedup_factor": 0.0}
          if status == "PASSED" else None}
    return {"definition": DEF, "solution": "sol", "workload": {"uuid": uuid, "axes": {"batch_size": batch},
                                                                "inputs": {}}, "evaluation": ev}


def _run(folder, traces):
    path = folder / "traces" / "me" / "gdn" / f"{DEF}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))
    return str(folder)


def test_fidelity_pairs_the_runs_and_sets_the_ratios_against_fib_against_itself(tmp_path, capsys):
    harness = _run(tmp_path / "h", [_trace("w1", 1, "PASSED", 0.0102), _trace("w2", 1, "PASSED", 0.0210),
                                    _trace("w3", 64, "INCORRECT_NUMERICAL")])
    fib = _run(tmp_path / "f", [_trace("w1", 1, "PASSED", 0.0100), _trace("w2", 1, "PASSED", 0.0200, 0.002),
                                _trace("w3", 64, "PASSED", 0.0500)])
    again = _run(tmp_path / "g", [_trace("w1", 1, "PASSED", 0.0099), _trace("w2", 1, "PASSED", 0.0206),
                                  _trace("w3", 64, "PASSED", 0.0500)])
    assert main(["fidelity", "--harness", harness, "--fib", fib, "--fib-again", again, "--definition", DEF,
                 "--out", str(tmp_path / "out")]) == 0
    rows = (tmp_path / "out" / "fidelity.csv").read_text().splitlines()
    head, row = rows[0].split(","), dict(zip(rows[0].split(","), rows[1].split(",")))
    assert head[:2] == ["definition", "solution"] and len(rows) == 2
    assert (row["pairs"], row["verdicts_equal"], row["both_passed"], row["errors_bitwise_equal"]) == ("3", "2", "2", "1")
    assert abs(float(row["ratio_median"]) - (1.02 + 1.05) / 2) < 1e-9          # 0.0102/0.0100, 0.0210/0.0200
    assert abs(float(row["noise_min"]) - 0.99) < 1e-9 and abs(float(row["noise_max"]) - 1.03) < 1e-9
    assert float(row["within_noise"]) == 0.5                                  # 1.02 inside [0.99, 1.03], 1.05 not
    md = (tmp_path / "out" / "fidelity.md").read_text()
    assert f"- {DEF} sol w3: harness INCORRECT_NUMERICAL, FlashInfer-Bench PASSED" in md
    assert f"| {DEF} | sol | 1.0350 |" in md                                  # the B=1 bucket's median ratio


def test_fidelity_refuses_a_folder_without_traces(tmp_path, capsys):
    assert main(["fidelity", "--harness", str(tmp_path), "--fib", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no traces/ folder" in capsys.readouterr().err
