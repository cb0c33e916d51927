"""`gdn-harness tune` (harness/tune.py) and the kernel's per-GPU tables (launch_table.table_for): the fastest correct
candidate per batch size is kept, a wrong one never, neighbours that agree are merged, and the kernel runs the
table tuned for its GPU's name, the shipped one elsewhere. Timings are made up here (the GPU's are not on a CPU);
correctness runs the real kernel through the interpreter against the definition's reference."""
import json
import shutil
from dataclasses import asdict, replace

import pytest
import torch

import harness.tune
from harness.build.folder_import import import_from_folder
from harness.cli import main
from harness.data.dataset import Dataset
from harness.data.jsonio import DataError
from harness.eval.child import TimingConfig
from tests.solutions import solution_dir

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"


def _copy(tmp_path, name, definition=DECODE):
    folder = tmp_path / name
    shutil.copytree(solution_dir(definition), folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder, import_from_folder(folder, "launch_table", f"_tune_test_{name}")


def test_the_fastest_correct_config_is_kept_and_a_wrong_one_never(tmp_path, monkeypatch):
    folder, lt = _copy(tmp_path, "a")
    kernel = harness.tune.load_package(folder, "kernel")
    real = kernel.launch

    def launch(*args, cfg):   # BV = 16 made wrong: its output comes back zero
        real(*args, cfg=cfg)
        if cfg.BV == 16:
            args[-2].zero_()
    monkeypatch.setattr(kernel, "launch", launch)
    fake_ms = {4: 0.0030, 8: 0.0020, 16: 0.0010}   # the wrong one would be the fastest
    monkeypatch.setattr(harness.tune, "_time_one", lambda launch, cfg, args, timing, device: fake_ms[cfg.BV])
    ds = Dataset()
    w = next(w for w in ds.workloads(ds.definition(DECODE)) if w.axes["batch_size"] == 1)
    configs = [lt.DecodeConfig(BV=bv) for bv in (4, 8, 16)]
    times = harness.tune.tune_batch(folder, ds, w, TimingConfig(0, 1, 1), "cpu", configs)
    assert times == {configs[0]: 0.0030, configs[1]: 0.0020}


def test_rows_that_repeat_the_one_below_are_merged():
    a, b = "A", "B"
    assert harness.tune.merge({1: a, 4: a, 8: b, 16: b, 32: a, 64: a}) == {1: a, 8: b, 32: a}


def test_the_kernel_runs_the_table_tuned_for_its_gpu(tmp_path, monkeypatch):
    folder, lt = _copy(tmp_path, "b")
    tuned = {1: lt.DecodeConfig(BV=8), 32: lt.DecodeConfig(BV=16, load_evict="", vb_fast=True)}
    as_json = lambda table: {str(b): asdict(c) for b, c in table.items()}  # noqa: E731 (what tune_decode writes)
    path = harness.tune.write_tuned(folder, "NVIDIA H200", as_json(tuned))
    harness.tune.write_tuned(folder, "NVIDIA B200", as_json({1: lt.DecodeConfig(BV=16)}))   # another GPU's kept
    assert sorted(json.loads(path.read_text())) == ["NVIDIA B200", "NVIDIA H200"]
    assert lt.table_for("NVIDIA H200") == tuned
    assert lt.table_for("NVIDIA H100") is lt.LAUNCH_TABLE
    monkeypatch.setattr(lt, "_device_name", lambda: "NVIDIA H200")
    assert lt.config_for(16)[1] == lt.DecodeConfig(BV=8)
    assert lt.config_for(64) == ((8, 64 * 8), tuned[32])   # vb_fast: (V / BV, B * HV)


def test_tune_refuses_a_folder_that_is_not_our_submission_and_an_unknown_definition(tmp_path, capsys):
    assert main(["tune", "--submission", str(tmp_path), "--device", "cpu"]) == 2
    assert "no launch_table.py" in capsys.readouterr().err
    assert main(["tune", "--definition", "gdn_mystery", "--device", "cpu"]) == 2
    assert "no launch table to tune for gdn_mystery" in capsys.readouterr().err


def test_tune_on_the_cpu_does_not_write_into_the_repos_submission(capsys):
    """--device cpu would write a 'cpu' table into submission/ (then packed); it needs a copy named."""
    assert main(["tune", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "writes a 'cpu' table into the submission it tunes" in err and "--submission with a copy" in err


def test_tune_without_a_gpu_says_it_needs_one(monkeypatch, capsys):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["tune"]) == 2   # what `make tune` runs; on the CPU only an explicit --device cpu (tests) goes on
    assert "--device: tune times our kernels on a GPU" in capsys.readouterr().err


def test_tune_on_a_gpu_demands_the_official_timer(monkeypatch, capsys):
    import torch
    import harness.eval.timing_cuda
    asked = []

    def no_cupti(timer):
        asked.append(timer)
        raise RuntimeError("cupti-python is not installed")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(harness.eval.timing_cuda, "resolve_timer", no_cupti)
    assert main(["tune", "--device", "cuda"]) == 2
    assert asked == ["cupti"] and "--timer: cupti-python is not installed" in capsys.readouterr().err


def test_a_broken_tuned_table_is_named_in_the_error(tmp_path):
    folder, lt = _copy(tmp_path, "c")
    (folder / "tuned_tables.json").write_text('{"NVIDIA H200": {"1": {"BV": 8, "colour": 1}}}')
    with pytest.raises(ValueError, match="tuned_tables.json: not a table written by `gdn-harness tune`"):
        lt.table_for("NVIDIA H200")
    (folder / "tuned_tables.json").write_text("{not json")
    with pytest.raises(DataError, match="tuned_tables.json"):
        harness.tune.write_tuned(folder, "NVIDIA H200", {})


def test_a_prefill_table_naming_a_field_the_kernel_has_not_is_refused_with_its_name(tmp_path):
    # e.g. prep_split, a field of tables written before every prep split Tm and P: refused, not silently dropped
    folder, lt = _copy(tmp_path, "q", PREFILL)
    row = [90, 1, {**asdict(lt.ONE_LAUNCH), "prep_split": False}]
    (folder / "tuned_tables.json").write_text(json.dumps({"NVIDIA H200": [row]}))
    with pytest.raises(ValueError, match=r"unknown launch config fields \['prep_split'\]"):
        lt.table_for("NVIDIA H200")
    row[2].pop("prep_split")
    (folder / "tuned_tables.json").write_text(json.dumps({"NVIDIA H200": [row]}))
    assert lt.table_for("NVIDIA H200") == (lt.Row(90, 1, lt.ONE_LAUNCH),)


def test_each_prefill_row_takes_the_fastest_config_correct_on_all_its_workloads(tmp_path, monkeypatch):
    folder, _ = _copy(tmp_path, "p", PREFILL)
    # the modules tune imports (one package: the kernel's launch_table is this one, its configs compare equal)
    kernel, lt = harness.tune.load_package(folder, "kernel"), harness.tune.load_package(folder, "launch_table")
    # the candidates beside the shipped config (BV = 8: 16 V slices a head) have fewer: cheaper in the interpreter
    shipped, other = lt.ONE_LAUNCH, replace(lt.ONE_LAUNCH, BV=64, num_warps=4)
    wrong = replace(lt.ONE_LAUNCH, BV=32)
    real = kernel._launch

    def launch(algo, *args, cfg):   # `wrong` made wrong: its output comes back zero
        real(algo, *args, cfg=cfg)
        if cfg == wrong:
            args[-2].zero_()
    monkeypatch.setattr(kernel, "_launch", launch)
    fake_ms = {other: 0.0020, shipped: 0.0030, wrong: 0.0010}   # the wrong one would be the fastest
    monkeypatch.setattr(harness.tune, "_time_one", lambda launch, cfg, args, timing, device: fake_ms[cfg])
    ds = Dataset()
    pre = ds.workloads(ds.definition(PREFILL))
    by_t = {w.axes["total_seq_len"]: w for w in pre if w.axes["num_seqs"] == 1}
    two = next(w for w in pre if w.axes["num_seqs"] == 2 and w.axes["total_seq_len"] <= 32)
    workloads = [by_t[6], by_t[12], two]   # the one-launch rows of one sequence (row 0) and of two (row j)
    rows, path = harness.tune.tune_prefill(folder, ds, TimingConfig(0, 1, 1), "cpu", "NVIDIA H200",
                                           [other, shipped, wrong], workloads)
    table = lt.LAUNCH_TABLE
    j = table.index(lt.row_of(two.axes["total_seq_len"], 2))
    assert j > 1 and table[j].max_n == 2 and table[j].config == shipped
    assert [(r, shipped_ms, best, best_ms, n) for r, shipped_ms, best, best_ms, n in rows] == [
        (table[0], 0.0030, other, 0.0020, 2), (table[j], 0.0030, other, 0.0020, 1)]
    tuned = lt.table_for("NVIDIA H200")   # bounds kept; rows 0 and j now `other`; rows no workload reached kept
    assert tuned == tuple(replace(row, config=other) if i in (0, j) else row for i, row in enumerate(table))
    assert lt.table_for("NVIDIA H100") is table
    assert lt.table_here(torch.device("cpu")) is table   # off a GPU: the shipped table


def test_a_config_that_led_in_the_tune_but_not_again_leaves_the_shipped_row(tmp_path, monkeypatch, capsys):
    folder, _ = _copy(tmp_path, "q", PREFILL)
    lt = harness.tune.load_package(folder, "launch_table")
    shipped, other = lt.ONE_LAUNCH, replace(lt.ONE_LAUNCH, BV=64, num_warps=4)   # BV = 64: fewer CTAs to interpret
    ds = Dataset()
    pre = ds.workloads(ds.definition(PREFILL))
    by_t = {w.axes["total_seq_len"]: w for w in pre if w.axes["num_seqs"] == 1}
    workloads = [by_t[6], by_t[12]]   # row 0
    tune_calls = harness.tune.ROUNDS * 2 * len(workloads)   # the tune's rounds of the two (correct) configs
    calls = []

    def fake(launch, cfg, args, timing, device):   # the other config ahead in the tune's rounds, behind afterwards
        calls.append(cfg)
        return {other: 0.0020 if len(calls) <= tune_calls else 0.0040, shipped: 0.0030}[cfg]
    monkeypatch.setattr(harness.tune, "_time_one", fake)
    rows, _ = harness.tune.tune_prefill(folder, ds, TimingConfig(0, 1, 1), "cpu", "NVIDIA H200", [other, shipped],
                                        workloads)
    assert len(calls) == tune_calls + 2 * harness.tune.CONFIRM_ROUNDS * len(workloads)
    assert [(r, best, best_ms) for r, _, best, best_ms, _ in rows] == [(lt.LAUNCH_TABLE[0], shipped, 0.0030)]
    assert f"row 0: {other} led the shipped config by 33.3%, but not in 4 more rounds" in capsys.readouterr().out
    assert lt.table_for("NVIDIA H200") == lt.LAUNCH_TABLE   # the tuned table is the shipped one


def test_a_pick_is_kept_when_confirmed_and_the_shipped_config_when_not(capsys):
    times = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert harness.tune.confirmed_pick(times, "b", "B=4", lambda c, s: (1.5, 2.0)) == "a"
    assert "B=4: a led the shipped config by 50.0%, and by 25.0% in 4 more rounds of the two; kept" \
        in capsys.readouterr().out
    assert harness.tune.confirmed_pick(times, "b", "B=4", lambda c, s: (2.0, 2.0)) == "b"   # a tie is no lead
    assert "B=4: a led the shipped config by 50.0%, but not in 4 more rounds of the two (2000.000 against " \
        "2000.000 us)" in capsys.readouterr().out
    seen = []
    assert harness.tune.confirmed_pick(times, "a", "B=4", lambda c, s: seen.append(c)) == "a"   # the shipped one led
    assert harness.tune.confirmed_pick(times, "x", "B=4", lambda c, s: seen.append(c)) == "a"   # shipped wrong here
    assert seen == [] and capsys.readouterr().out == ""


def test_the_copy_floor_times_a_copy_of_the_workloads_state(monkeypatch):
    """Beside the candidates, tune times new_state.copy_(state) on the workload's own tensors: the bytes the decode
    kernel must move; its table gives the tuned row's ratio to it."""
    import harness.eval.state_copy
    from harness.eval.timing import TimingResult

    seen = []
    monkeypatch.setattr(harness.eval.state_copy, "measure", lambda fn, args, timing, device, timer:
                        seen.append((fn, args)) or TimingResult(0.5, "stub"))
    ds = Dataset()
    definition = ds.definition(DECODE)
    w = next(w for w in ds.workloads(definition) if w.axes["batch_size"] == 4)
    assert harness.tune.copy_floor(definition, ds, w, TimingConfig(0, 1, 1), "cpu") == 0.5
    (fn, (state, new_state)), = seen
    assert state.shape == new_state.shape == (4, 8, 128, 128) and state.dtype == new_state.dtype == torch.float32
    fn(state, new_state)
    assert torch.equal(new_state, state) and state.abs().sum() > 0
    from harness.cli import _tune_table
    table = _tune_table([("B=64", 0.0200, "cfg", 0.0190, 0.0180), ("T<=16 N<=None (2 workloads)", None, "c", 0.01,
                                                                     None)]).splitlines()
    assert table[0].split()[-3:] == ["tuned/copy", "tuned", "config"]
    assert table[1].split() == ["B=64", "20.000", "19.000", "0.950", "18.000", "1.056", "cfg"]
    assert table[2].split()[-6:] == ["here", "10.000", "-", "-", "-", "c"]   # shipped wrong, no copy for prefill


def test_the_prefill_candidates_are_built_in_processes_and_failures_named(tmp_path, capsys):
    # two small workloads x (two configs, one that the launcher refuses) in two spawned builder processes (under the
    # interpreter here: the orchestration, not Triton's cache, is what this checks)
    folder, _ = _copy(tmp_path, "p", PREFILL)
    lt = harness.tune.load_package(folder, "launch_table")
    refused = replace(lt.SEG, segs=2)   # "segs needs >= 3 segments"
    ds = Dataset()
    small = [w for w in ds.workloads(ds.definition(PREFILL)) if w.axes["total_seq_len"] <= 12]
    assert len(small) == 2
    failed = harness.tune.build_in_parallel(folder, ds, small, [lt.ONE_LAUNCH, refused], "cpu", jobs=2)
    assert sorted(failed) == sorted(w.uuid for w in small)
    assert all(len(f) == 1 and f[0][0] == refused and "segs needs >= 3" in f[0][1] for f in failed.values())
    out = capsys.readouterr().out
    assert out.count("failed (ValueError") == 2 and "built in" in out
    # a workload its process cannot even prepare (here: a decode one) is named once, with all its configs failed
    dec = ds.workloads(ds.definition("gdn_decode_qk4_v8_d128_k_last"))[0]
    failed = harness.tune.build_in_parallel(folder, ds, [dec], [lt.ONE_LAUNCH, refused], "cpu", jobs=1)
    assert [c for c, _ in failed[dec.uuid]] == [lt.ONE_LAUNCH, refused]
    assert "its builder process failed" in capsys.readouterr().out
