"""`gdn-harness full` (what `make eval` runs): what it does without a GPU, and the options it hands the evaluation loop
(the loop itself is tested elsewhere; here it is replaced by a recorder)."""
import json

import pytest
import torch

from harness import full
from harness.build.builders import CACHE_ROOT
from harness.cli import main
from harness.eval.options import default_prepare_jobs
from harness.eval.child import TimingConfig


@pytest.mark.parametrize("command", ["full", "bench"])
def test_without_a_gpu_it_says_so_and_points_to_the_cpu_mode(monkeypatch, capsys, command):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main([command]) == 2
    err = capsys.readouterr().err
    assert f"gdn-harness {command} (make " in err and "needs a CUDA GPU" in err and "--device cpu" in err


@pytest.mark.parametrize("name, slug", [("NVIDIA H200", "h200"), ("NVIDIA B200", "b200"),
                                        ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
                                        ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"), ("", "gpu")])
def test_gpu_slug(name, slug):
    assert full.gpu_slug(name) == slug


@pytest.fixture
def recorded(monkeypatch):
    """full.main on a pretend GPU host; returns the calls it made to evaluate()."""
    import harness.eval.loop
    import harness.eval.timing_cuda

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(full, "ensure_packages", lambda: [])
    monkeypatch.setattr(harness.eval.timing_cuda, "resolve_timer", lambda timer: "cupti")
    monkeypatch.setattr(harness.eval.loop, "evaluate",
                        lambda ds, d, w, sols, opts, stats=None: calls.append((d.name, [s.name for s in sols], len(w),
                                                                                opts)) or [])
    return calls


def test_defaults_hand_the_loop_what_the_readme_says(recorded, tmp_path, capsys):
    assert main(["full", "--out", str(tmp_path), "--no-report"]) == 0
    (dec, dec_sols, dec_n, dec_opts), (pre, pre_sols, pre_n, pre_opts) = recorded
    assert (dec, dec_n, pre, pre_n) == ("gdn_decode_qk4_v8_d128_k_last", 54, "gdn_prefill_qk4_v8_d128_k_last", 100)
    assert dec_sols == ["gdn-harness-decode", "flashinfer-gdn-decode"]
    assert pre_sols == ["gdn-harness-prefill", "flashinfer-gdn-prefill", "gdn-harness-prefill-recurrent"]
    for opts in (dec_opts, pre_opts):
        assert opts.device == "cuda" and opts.resume and opts.isolation == "worker"
        assert opts.reference_cache == tmp_path / "reference_latency.json"
        assert opts.payload_cache == CACHE_ROOT / "payloads" and opts.reference_budget_s is None
        assert opts.prepare_jobs == default_prepare_jobs()
    assert dec_opts.reference_timing is None                      # the decode reference: as officially
    assert pre_opts.reference_timing == TimingConfig(0, 1, 1)     # the prefill reference: 1 x 1
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [r["definition"] for r in runs] == [dec, pre]
    assert runs[1]["solutions"] == pre_sols and runs[1]["workloads"] == 100 and runs[1]["wall_s"] >= 0
    assert runs[1]["argv"] == ["--out", str(tmp_path), "--no-report"] and runs[1]["isolation"] == "worker"
    out = capsys.readouterr().out
    assert "persistent child" in out and "reference outputs are reused" in out and "1 trial of 1 iteration" in out


def test_options_override_the_defaults(recorded, tmp_path):
    args = ["--out", str(tmp_path), "--no-report", "--no-extras", "--isolation", "process", "--no-resume",
            "--no-reference-output-cache", "--reference-budget", "30", "--reference-timing", "official",
            "--definition", "gdn_prefill_qk4_v8_d128_k_last", "--workloads", "0-4", "--prepare-jobs", "3"]
    assert main(["full", *args]) == 0
    ((name, sols, n, opts),) = recorded
    assert name == "gdn_prefill_qk4_v8_d128_k_last" and n == 5
    assert sols == ["gdn-harness-prefill", "flashinfer-gdn-prefill"]
    assert opts.isolation == "process" and not opts.resume and opts.payload_cache is None
    assert opts.reference_budget_s == 30 and opts.reference_timing is None and opts.prepare_jobs == 3


def test_peers_flag_adds_the_other_authors(recorded, tmp_path):
    assert main(["full", "--out", str(tmp_path), "--no-report", "--peers"]) == 0
    (_, dec_sols, _, _), (_, pre_sols, _, _) = recorded
    assert dec_sols[-1] == "fla-gdn-decode" and pre_sols[-1] == "fla-gdn-prefill"


@pytest.mark.parametrize("definition", ["gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"])
def test_fla_peers_resolve_by_author_and_fit_the_signature(definition):
    """The FLA peers (run on a GPU only) are valid solutions of their definition, named by their author."""
    from harness.data.dataset import Dataset
    from harness.build.package import validate
    from harness.data.resolve import resolve

    ds = Dataset()
    d = ds.definition(definition)
    (sol,) = resolve("fla", d, ds)
    assert sol.author == "fla" and not sol.spec.destination_passing_style
    validate(sol, d, sol.name)  # entry point present, value-returning with one parameter per input
    assert [s.author for s in resolve("baseline", d, ds)] == ["baseline"]


def test_bench_is_a_fresh_full_run_with_cached_reference_latencies(recorded, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    monkeypatch.setattr(full, "RESULTS_ROOT", results)
    (results / "h200").mkdir(parents=True)
    (results / "h200" / "reference_latency.json").write_text('{"some-key": 1.5}')
    import harness.build.builders
    monkeypatch.setattr(harness.build.builders, "CACHE_ROOT", tmp_path / "cache")
    out = tmp_path / "cache" / "bench" / "h200"
    out.mkdir(parents=True)
    (out / "traces.jsonl").write_text("left by an earlier benchmark")
    assert main(["bench"]) == 0
    assert not (out / "traces.jsonl").exists()                     # a fresh folder: nothing resumed
    assert json.loads((out / "reference_latency.json").read_text()) == {"some-key": 1.5}
    (_, dec_sols, dec_n, dec_opts), (_, pre_sols, pre_n, pre_opts) = recorded
    assert (dec_n, pre_n) == (54, 100)
    assert dec_sols == ["gdn-harness-decode", "flashinfer-gdn-decode"]      # no extras, no peers
    assert pre_sols == ["gdn-harness-prefill", "flashinfer-gdn-prefill"]
    for opts in (dec_opts, pre_opts):
        assert not opts.resume and opts.payload_cache is None and opts.reference_budget_s == 0
        assert opts.reference_cache == out / "reference_latency.json"
    recorded_runs = (results / "h200" / "bench" / "runs.jsonl").read_text().splitlines()
    assert [json.loads(r)["definition"] for r in recorded_runs] == ["gdn_decode_qk4_v8_d128_k_last",
                                                                   "gdn_prefill_qk4_v8_d128_k_last"]
    assert "within the 600 s target" in capsys.readouterr().out


def test_another_folder_starts_from_the_results_reference_latencies(recorded, tmp_path, monkeypatch, capsys):
    """A pass into a fresh folder reuses results/<gpu>/reference_latency.json (a copy: the results stay as they
    are); a folder with a cache of its own keeps it."""
    results = tmp_path / "results"
    monkeypatch.setattr(full, "RESULTS_ROOT", results)
    (results / "h200").mkdir(parents=True)
    (results / "h200" / "reference_latency.json").write_text('{"k": 2.5}')
    fresh = tmp_path / "fresh" / "pass"
    assert main(["full", "--out", str(fresh), "--no-report", "--definition", "gdn_decode_qk4_v8_d128_k_last"]) == 0
    assert json.loads((fresh / "reference_latency.json").read_text()) == {"k": 2.5}
    assert recorded[-1][3].reference_cache == fresh / "reference_latency.json"
    assert f"(started from {results / 'h200' / 'reference_latency.json'})" in capsys.readouterr().out

    own = tmp_path / "own"
    own.mkdir()
    (own / "reference_latency.json").write_text('{"mine": 1.0}')
    assert main(["full", "--out", str(own), "--no-report", "--definition", "gdn_decode_qk4_v8_d128_k_last"]) == 0
    assert json.loads((own / "reference_latency.json").read_text()) == {"mine": 1.0}
    assert "started from" not in capsys.readouterr().out
    assert main(["full", "--no-report", "--definition", "gdn_decode_qk4_v8_d128_k_last"]) == 0   # results/h200
    assert json.loads((results / "h200" / "reference_latency.json").read_text()) == {"k": 2.5}


def test_bench_refuses_a_folder_that_holds_something(recorded, tmp_path, capsys):
    (tmp_path / "results.txt").write_text("someone's results")
    assert main(["bench", "--out", str(tmp_path)]) == 2
    assert (tmp_path / "results.txt").exists() and not recorded
    assert "needs a fresh folder" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_prepare_jobs_must_be_a_positive_number(value, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["full", "--prepare-jobs", value])
    assert exc.value.code == 2 and "--prepare-jobs: expected a whole number >= 1" in capsys.readouterr().err


def test_ray_reaches_the_loop_and_the_run_record(recorded, tmp_path, capsys):
    from harness.dist.cluster import RayOptions

    assert main(["full", "--out", str(tmp_path), "--no-report", "--ray", "auto", "--ray-actors", "2"]) == 0
    assert {opts.ray for *_, opts in recorded} == {RayOptions("auto", 2)}
    assert {json.loads(line)["ray"] for line in (tmp_path / "runs.jsonl").read_text().splitlines()} == {"auto"}
    assert "one at a time per Ray actor" in capsys.readouterr().out   # printed as a deliberate difference


def test_ray_alone_is_a_local_instance_and_gpus_is_gone(recorded, tmp_path, capsys):
    from harness.dist.cluster import RayOptions

    assert main(["full", "--out", str(tmp_path), "--no-report", "--ray", "--definition",
                 "gdn_decode_qk4_v8_d128_k_last"]) == 0
    assert recorded[0][3].ray == RayOptions("local", None)   # None: one actor per GPU of the instance
    assert main(["full", "--out", str(tmp_path), "--no-report", "--ray-actors", "2"]) == 2
    assert "--ray-actors: needs --ray" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["full", "--gpus", "2"])


def test_a_damaged_file_stops_the_pass_with_its_name(recorded, tmp_path, monkeypatch, capsys):
    """A DataError from the loop (a damaged cache or blob) ends the pass with exit 2 and the file's name, not a
    traceback; what was written stays."""
    import harness.eval.loop
    from harness.data.jsonio import DataError

    def damaged(*a, **k):
        raise DataError(tmp_path / "reference_latency.json", "invalid JSON", "repair it")

    monkeypatch.setattr(harness.eval.loop, "evaluate", damaged)
    assert main(["full", "--out", str(tmp_path), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert f"error: {tmp_path / 'reference_latency.json'}: invalid JSON" in err and "(fix: repair it)" in err
    assert f"stay in {tmp_path}/" in err
