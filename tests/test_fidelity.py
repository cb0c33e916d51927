"""The fidelity and agreement reports (harness/report/fidelity.py) on hand-made trace folders: one run of the harness,
two of FlashInfer-Bench (or any run a against run b and b again); every figure worked out by hand."""
import csv
import json

from harness.cli import main

DEF = "gdn_decode_qk4_v8_d128_k_last"


def _trace(uuid, batch, status, latency_ms=None, max_abs=0.001, solution="sol", reference_ms=0.0):
    ev = {"status": status, "environment": {"hardware": "NVIDIA H200", "libs": {}}, "timestamp": "2026-12-02T00:00:00",
          "log": "", "correctness": {"max_relative_error": 0.01, "max_absolute_error": max_abs}
          if status in ("PASSED", "INCORRECT_NUMERICAL") else None,
          "performance": {"latency_ms": latency_ms, "reference_latency_ms": reference_ms, "speedup_factor": 0.0}
          if status == "PASSED" else None}
    return {"definition": DEF, "solution": solution, "workload": {"uuid": uuid, "axes": {"batch_size": batch},
                                                                "inputs": {}}, "evaluation": ev}


def _run(folder, traces):
    path = folder / "traces" / "me" / "gdn" / f"{DEF}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))
    return str(folder)


def test_fidelity_pairs_the_runs_and_sets_the_ratios_against_fib_against_itself(tmp_path, capsys):
    harness = _run(tmp_path / "h", [_trace("w1", 1, "PASSED", 0.0102), _trace("w2", 1, "PASSED", 0.0210),
                                    _trace("w3", 64, "INCORRECT_NUMERICAL"), _trace("w4", 64, "INCORRECT_NUMERICAL")])
    fib = _run(tmp_path / "f", [_trace("w1", 1, "PASSED", 0.0100), _trace("w2", 1, "PASSED", 0.0200, 0.002),
                                _trace("w3", 64, "PASSED", 0.0500), _trace("w4", 64, "INCORRECT_NUMERICAL")])
    again = _run(tmp_path / "g", [_trace("w1", 1, "PASSED", 0.0099), _trace("w2", 1, "PASSED", 0.0206),
                                  _trace("w3", 64, "PASSED", 0.0500), _trace("w4", 64, "INCORRECT_NUMERICAL")])
    assert main(["fidelity", "--harness", harness, "--fib", fib, "--fib-again", again, "--definition", DEF,
                 "--out", str(tmp_path / "out")]) == 0
    rows = (tmp_path / "out" / "fidelity.csv").read_text().splitlines()
    head, row = rows[0].split(","), dict(zip(rows[0].split(","), rows[1].split(",")))
    assert head[:2] == ["definition", "solution"] and len(rows) == 2
    # errors: w1 and w3 (failed on one side) equal, w2 not, w4 (failed on both) equal
    assert (row["pairs"], row["verdicts_equal"], row["both_passed"]) == ("4", "3", "2")
    assert (row["errors_compared"], row["errors_bitwise_equal"]) == ("4", "3")
    assert abs(float(row["ratio_median"]) - (1.02 + 1.05) / 2) < 1e-9          # 0.0102/0.0100, 0.0210/0.0200
    assert abs(float(row["noise_min"]) - 0.99) < 1e-9 and abs(float(row["noise_max"]) - 1.03) < 1e-9
    assert float(row["within_noise"]) == 0.5                                  # 1.02 inside [0.99, 1.03], 1.05 not
    assert float(row["within_noise_if_same"]) == 0.5                          # 3 noise pairs: (3 - 1) / (3 + 1)
    md = (tmp_path / "out" / "fidelity.md").read_text()
    assert f"- {DEF} sol w3: harness INCORRECT_NUMERICAL, FlashInfer-Bench PASSED" in md
    assert f"| {DEF} | sol | 1.0350 |" in md                                  # the B=1 bucket's median ratio


def test_fidelity_refuses_a_folder_without_traces(tmp_path, capsys):
    assert main(["fidelity", "--harness", str(tmp_path), "--fib", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no traces/ folder" in capsys.readouterr().err


def test_agreement_pairs_any_two_runs_named_after_their_folders(tmp_path, capsys):
    ray = _run(tmp_path / "ray", [_trace("w1", 1, "PASSED", 0.0102), _trace("w2", 1, "PASSED", 0.0190, 0.002),
                                  _trace("w3", 64, "PASSED", 0.0480),
                                  _trace("w1", 1, "PASSED", 0.0300, solution="other"),
                                  _trace("w2", 64, "RUNTIME_ERROR", solution="other")])
    local = _run(tmp_path / "local", [_trace("w1", 1, "PASSED", 0.0100), _trace("w2", 1, "PASSED", 0.0200),
                                      _trace("w3", 64, "PASSED", 0.0400),
                                      _trace("w1", 1, "PASSED", 0.0250, solution="other"),
                                      _trace("w2", 64, "PASSED", 0.0100, solution="other")])
    again = _run(tmp_path / "again", [_trace("w1", 1, "PASSED", 0.0097), _trace("w2", 1, "PASSED", 0.0208),
                                      _trace("w3", 64, "PASSED", 0.0412)])           # "other" not run again
    out = tmp_path / "out"
    assert main(["agreement", "--run", ray, "--against", local, "--again", again, "--definition", DEF,
                 "--out", str(out)]) == 0
    assert f"agreement report: {out / 'agreement.md'}" in capsys.readouterr().out
    assert not (out / "fidelity.md").exists() and (out / "agreement_pairs.csv").exists()
    rows = {r["solution"]: r for r in csv.DictReader((out / "agreement.csv").open())}
    sol, other = rows["sol"], rows["other"]
    counts = sol["pairs"], sol["verdicts_equal"], sol["both_passed"], sol["errors_bitwise_equal"]
    assert counts == ("3", "3", "3", "2")
    # ratios ray / local: 0.0102/0.0100 = 1.02, 0.0190/0.0200 = 0.95, 0.0480/0.0400 = 1.20
    assert abs(float(sol["ratio_median"]) - 1.02) < 1e-9
    assert abs(float(sol["ratio_min"]) - 0.95) < 1e-9 and abs(float(sol["ratio_max"]) - 1.20) < 1e-9
    # noise again / local: 0.0097/0.0100 = 0.97, 0.0208/0.0200 = 1.04, 0.0412/0.0400 = 1.03
    assert abs(float(sol["noise_min"]) - 0.97) < 1e-9 and abs(float(sol["noise_max"]) - 1.04) < 1e-9
    assert abs(float(sol["noise_median"]) - 1.03) < 1e-9
    assert abs(float(sol["within_noise"]) - 1 / 3) < 1e-9                      # only 1.02 inside [0.97, 1.04]
    assert (other["pairs"], other["verdicts_equal"], other["both_passed"], other["errors_bitwise_equal"]) == \
        ("2", "1", "1", "1")
    assert other["errors_compared"] == "1"                                     # a RUNTIME_ERROR records none
    assert abs(float(other["ratio_median"]) - 1.2) < 1e-9                      # 0.0300/0.0250
    assert abs(float(sol["within_noise_if_same"]) - 2 / 4) < 1e-9              # 3 noise pairs
    no_again = ("noise_median", "noise_min", "noise_max", "within_noise", "within_noise_if_same")   # no second run
    assert [other[c] for c in no_again] == ["", "", "", "", ""]
    md = (out / "agreement.md").read_text()
    assert md.startswith("# ray against local\n")
    assert f"; local again (noise floor): `{again}`." in md and "Ratios are ray latency / local latency" in md
    assert f"- {DEF} other w2: ray RUNTIME_ERROR, local PASSED" in md
    assert f"| {DEF} | sol | 0.9850 | 1.2000 |" in md                          # B=1: (1.02 + 0.95) / 2; B=64: 1.20
    assert f"| {DEF} | other | 1.2000 | - |" in md


def test_agreement_takes_names_and_refuses_a_folder_without_traces(tmp_path, capsys):
    run = _run(tmp_path / "a", [_trace("w1", 1, "PASSED", 0.0110)])
    against = _run(tmp_path / "b", [_trace("w1", 1, "INCORRECT_NUMERICAL")])
    assert main(["agreement", "--run", run, "--against", against, "--definition", DEF, "--names", "Ray", "local",
                 "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "agreement.md").read_text()
    assert "Ray run: " in md and "; no second local run was given, so there is no noise floor." in md
    assert f"- {DEF} sol w1: Ray PASSED, local INCORRECT_NUMERICAL" in md
    assert main(["agreement", "--run", run, "--against", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no traces/ folder" in capsys.readouterr().err


def test_reference_latencies_are_paired_where_both_runs_timed_them(tmp_path, capsys):
    harness = _run(tmp_path / "h", [_trace("w1", 1, "PASSED", 0.010, reference_ms=2.10),
                                    _trace("w2", 1, "PASSED", 0.020, reference_ms=4.00),
                                    _trace("w3", 64, "PASSED", 0.050)])              # not timed here
    fib = _run(tmp_path / "f", [_trace("w1", 1, "PASSED", 0.010, reference_ms=2.00),
                                _trace("w2", 1, "PASSED", 0.020, reference_ms=4.40),
                                _trace("w3", 64, "PASSED", 0.050, reference_ms=9.00)])
    assert main(["fidelity", "--harness", harness, "--fib", fib, "--definition", DEF,
                 "--out", str(tmp_path / "out")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "out" / "fidelity.csv")))
    assert int(rows[0]["reference_pairs"]) == 2                           # w3: the harness did not time it
    assert abs(float(rows[0]["reference_ratio_median"]) - (2.10 / 2.00 + 4.00 / 4.40) / 2) < 1e-9
    assert abs(float(rows[0]["reference_ratio_min"]) - 4.00 / 4.40) < 1e-9
    assert abs(float(rows[0]["reference_ratio_max"]) - 2.10 / 2.00) < 1e-9


def _run_with_baseline(folder, mine, base):
    for author, traces in (("me", mine), ("baseline", base)):
        path = folder / "traces" / author / "gdn" / f"{DEF}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(t) + "\n" for t in traces))
    return str(folder)


def test_both_score_rules_are_reported_per_run(tmp_path, capsys):
    base = [_trace("w1", 1, "PASSED", 0.020, solution="fi"), _trace("w2", 1, "PASSED", 0.020, solution="fi")]
    harness = _run_with_baseline(tmp_path / "h", [_trace("w1", 1, "PASSED", 0.010), _trace("w2", 1, "PASSED", 0.020)],
                                 base)
    fib = _run_with_baseline(tmp_path / "f", [_trace("w1", 1, "PASSED", 0.010), _trace("w2", 1, "RUNTIME_ERROR")],
                             base)
    assert main(["fidelity", "--harness", harness, "--fib", fib, "--definition", DEF,
                 "--out", str(tmp_path / "out")]) == 0
    rows = {r["solution"]: r for r in csv.DictReader(open(tmp_path / "out" / "fidelity_scores.csv"))}
    mine = rows["sol"]
    # the harness's run: speedups 2.0 and 1.0, both rules 1.5; FIB's: one pair failed, so 0 under both rules
    assert float(mine["harness_rule harness"]) == 1.5 and float(mine["official_rule harness"]) == 1.5
    assert float(mine["harness_rule FlashInfer-Bench"]) == 0.0 and float(mine["official_rule FlashInfer-Bench"]) == 0.0
    assert "## Scores vs the FlashInfer baseline, both rules" in (tmp_path / "out" / "fidelity.md").read_text()


def test_pairs_traced_in_one_run_only_are_counted_and_listed(tmp_path, capsys):
    # FIB failed to run w2 (no trace), FIB again w3, and the harness has no w4: the report must say so, not just pair
    # fewer workloads
    harness = _run(tmp_path / "h", [_trace("w1", 1, "PASSED", 0.0102), _trace("w2", 1, "PASSED", 0.0210),
                                    _trace("w3", 64, "PASSED", 0.0500)])
    fib = _run(tmp_path / "f", [_trace("w1", 1, "PASSED", 0.0100), _trace("w3", 64, "PASSED", 0.0500),
                                _trace("w4", 64, "PASSED", 0.0500)])
    again = _run(tmp_path / "g", [_trace("w1", 1, "PASSED", 0.0099), _trace("w4", 64, "PASSED", 0.0500)])
    assert main(["fidelity", "--harness", harness, "--fib", fib, "--fib-again", again, "--definition", DEF,
                 "--out", str(tmp_path / "out")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "out" / "fidelity.csv")))
    assert (rows[0]["pairs"], rows[0]["noise_pairs"]) == ("2", "2")           # w1, w3 paired; w1, w4 in the noise
    assert rows[0]["unpaired"] == "3"
    md = (tmp_path / "out" / "fidelity.md").read_text()
    section = md.split("## Pairs traced in one run only")[1]
    assert f"- {DEF} sol w2: in harness, not in FlashInfer-Bench" in section
    assert f"- {DEF} sol w4: in FlashInfer-Bench, not in harness" in section
    assert f"- {DEF} sol w3: in FlashInfer-Bench, not in FlashInfer-Bench again" in section
    assert "3 pair(s) traced in one run only" in capsys.readouterr().out


def test_pairing_finished_runs_says_which_options_it_ignores_and_what_it_needs(tmp_path, capsys):
    harness = _run(tmp_path / "h", [_trace("w1", 1, "PASSED", 0.0102)])
    fib = _run(tmp_path / "f", [_trace("w1", 1, "PASSED", 0.0100)])
    assert main(["fidelity", "--harness", harness, "--fib", fib, "--workloads", "0-2", "--device", "cpu",
                 "--out", str(tmp_path / "out")]) == 0
    assert "ignored: --device, --workloads" in capsys.readouterr().err       # both apply to running the tools
    assert main(["fidelity", "--harness", harness]) == 2                     # no --fib: said before the missing --out
    assert "name solutions to run (--solution) or two finished runs (--harness and --fib)" in capsys.readouterr().err
    assert main(["agreement", "--run", harness, "--against", harness, "--out", str(tmp_path / "a")]) == 2
    assert "names the same folder as --run" in capsys.readouterr().err


def test_agreement_says_when_its_runs_are_no_like_for_like_figure(tmp_path, capsys):
    """Two CPU wall-clock runs, or runs on other GPUs or timers, gave latency ratios without a word."""
    def run(name, hardware, timer=None):
        traces = [_trace("w1", 1, "PASSED", 0.0100), _trace("w2", 1, "PASSED", 0.0200)]
        for t in traces:
            t["evaluation"]["environment"]["hardware"] = hardware
            if timer:
                t["evaluation"]["environment"]["libs"]["timer"] = timer
        return _run(tmp_path / name, traces)
    h200, h100 = run("a", "NVIDIA H200", "cupti"), run("b", "NVIDIA H100 80GB HBM3", "cupti")
    cpu, cpu2 = (run(name, "CPU x86_64", "cpu-wall-clock (not official)") for name in ("c", "d"))
    fib = run("f", "NVIDIA H200")
    assert main(["agreement", "--run", h200, "--against", h100, "--definition", DEF, "--out",
                 str(tmp_path / "o1")]) == 0
    md = (tmp_path / "o1" / "agreement.md").read_text()
    assert "**The runs differ in hardware (a: NVIDIA H200; b: NVIDIA H100 80GB HBM3)" in md
    assert "warning: the runs differ in hardware" in capsys.readouterr().out
    assert main(["agreement", "--run", cpu, "--against", cpu2, "--definition", DEF, "--out",
                 str(tmp_path / "o2")]) == 0
    assert "**Timed with the CPU wall clock (c, d)" in (tmp_path / "o2" / "agreement.md").read_text()
    capsys.readouterr()
    # FlashInfer-Bench's traces name no timer: a run beside the harness's on the same GPU is like for like
    assert main(["agreement", "--run", h200, "--against", fib, "--definition", DEF, "--out",
                 str(tmp_path / "o3")]) == 0
    assert "warning" not in capsys.readouterr().out
