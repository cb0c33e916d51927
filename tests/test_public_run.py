"""`gdn-harness public run` (a GPU command): what it hands the evaluation loop and the leaderboard, on a pretend
GPU host (the loop and the leaderboard themselves are tested elsewhere)."""
import json

import torch

import harness.eval.console
import harness.report.leaderboard
import harness.public.commands
import harness.eval.timing_cuda
from harness.cli import main
from harness.public.entries import load_entries
from harness.public.runs_here import runnable
from harness.data.resolve import reference_solution
from harness.eval.give_up import GiveUpRule


def test_public_run_puts_every_runnable_entry_beside_ours_and_lists_the_rest(monkeypatch, tmp_path, capsys):
    entries = load_entries()
    decode = [e for e in entries if e.definition == "gdn_decode_qk4_v8_d128_k_last"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(harness.eval.timing_cuda, "resolve_timer", lambda timer: "cupti")
    monkeypatch.setattr(harness.public.commands, "device_capability_here", lambda: (9, 0))

    def fetched(cache, definition, entries, capability):
        from harness.data.dataset import Dataset
        sol = reference_solution(Dataset().definition(definition))
        sol.name = f"public-{definition[:10]}"
        return [sol], [(decode[0], "not runnable here: does not run on sm_90: made up")]

    calls = []
    monkeypatch.setattr(harness.public.commands, "public_solutions", fetched)
    monkeypatch.setattr(harness.eval.console, "run_definition",
                        lambda ds, d, w, sols, opts, stats=None, table=True:
                        calls.append((d.name, [s.name for s in sols], w, opts)) or [])

    def leaderboard(out, definitions, ours, facts=None):
        for d in definitions:
            (out / "leaderboard").mkdir(parents=True, exist_ok=True)
            (out / "leaderboard" / f"{d.name}.md").write_text("# table\n")
        assert facts[decode[0].name] == f"{decode[0].repo}@{decode[0].commit}"
        assert ours == {"gdn_decode_qk4_v8_d128_k_last": "gdn-harness-decode",
                        "gdn_prefill_qk4_v8_d128_k_last": "gdn-harness-prefill"}
        import pandas as pd
        return {d.name: pd.DataFrame() for d in definitions}

    monkeypatch.setattr(harness.report.leaderboard, "write_leaderboard", leaderboard)
    assert main(["public", "run", "--out", str(tmp_path), "--workloads", "0-6"]) == 0
    assert [(name, sols, len(w)) for name, sols, w, _ in calls] == [
        ("gdn_decode_qk4_v8_d128_k_last", ["gdn-harness-decode", "flashinfer-gdn-decode", "fla-gdn-decode",
                                           "public-gdn_decode"], 7),
        ("gdn_prefill_qk4_v8_d128_k_last", ["gdn-harness-prefill", "flashinfer-gdn-prefill", "fla-gdn-prefill",
                                            "public-gdn_prefil"], 7)]
    assert all(opts.device == "cuda" and opts.isolation == "worker" and opts.give_up == GiveUpRule(2, 120.0)
               for *_, opts in calls)
    # smallest inputs first (the prefill file's first seven have T = 6, 134, 134, 8192, 8192, 8192, 4124)
    prefill_t = [w.axes["total_seq_len"] for w in calls[1][2]]
    assert prefill_t[:3] == [6, 134, 134] and prefill_t[3] == 4124 and prefill_t[4:] == [8192] * 3
    assert f"{decode[0].name} is not run: not runnable here: does not run on sm_90: made up" in capsys.readouterr().out
    md = (tmp_path / "leaderboard" / "gdn_decode_qk4_v8_d128_k_last.md").read_text()
    assert "## Not run here" in md and f"- {decode[0].name} ({decode[0].repo}@{decode[0].commit[:12]})" in md
    records = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [(r["definition"], r["solutions"][-1], r["gpu"]) for r in records] == [
        ("gdn_decode_qk4_v8_d128_k_last", "public-gdn_decode", "NVIDIA H200"),
        ("gdn_prefill_qk4_v8_d128_k_last", "public-gdn_prefil", "NVIDIA H200")]


def test_public_run_takes_extra_solutions_and_refuses_a_name_twice(monkeypatch, tmp_path, capsys):
    from harness.data.dataset import Dataset
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(harness.eval.timing_cuda, "resolve_timer", lambda timer: "cupti")
    monkeypatch.setattr(harness.public.commands, "device_capability_here", lambda: (9, 0))
    monkeypatch.setattr(harness.public.commands, "public_solutions", lambda *a: ([], []))
    calls, opts_seen = [], []
    monkeypatch.setattr(harness.eval.console, "run_definition",
                        lambda ds, d, w, sols, opts, stats=None, table=True: calls.append([s.name for s in sols])
                        or opts_seen.append(opts.state_copy) or [])
    monkeypatch.setattr(harness.report.leaderboard, "write_leaderboard",
                        lambda out, definitions, ours, facts=None: {})
    d = Dataset().definition("gdn_decode_qk4_v8_d128_k_last")
    mine = reference_solution(d).to_json()
    mine["name"] = "my-candidate"
    (tmp_path / "mine.json").write_text(json.dumps(mine))
    argv = ["public", "run", "--out", str(tmp_path / "o"), "--definition", d.name, "--workloads", "0"]
    assert main([*argv, "--solution", str(tmp_path / "mine.json"), "--state-copy"]) == 0
    assert calls == [["gdn-harness-decode", "flashinfer-gdn-decode", "fla-gdn-decode", "my-candidate"]]
    assert opts_seen == [True]   # --state-copy reaches the run's options
    mine["name"] = "fla-gdn-decode"
    (tmp_path / "mine.json").write_text(json.dumps(mine))
    assert main([*argv, "--solution", str(tmp_path / "mine.json")]) == 2
    assert "two solutions named fla-gdn-decode" in capsys.readouterr().err


def test_public_report_rewrites_the_leaderboard_of_a_folder_for_the_gpu_it_was_taken_on(monkeypatch, tmp_path,
                                                                                          capsys):
    definition = "gdn_decode_qk4_v8_d128_k_last"
    entries = [e for e in load_entries() if e.definition == definition]
    traced, unrunnable = entries[0], next(e for e in entries if not runnable(e, (9, 0))[0])
    trace = {"definition": definition, "workload": {}, "solution": traced.name, "evaluation": {
        "environment": {"hardware": "NVIDIA H200", "libs": {"compute_capability": "9.0"}}}}
    (tmp_path / "traces" / "a" / "gdn").mkdir(parents=True)
    (tmp_path / "traces" / "a" / "gdn" / f"{definition}.jsonl").write_text(json.dumps(trace) + "\n")
    seen = {}

    def leaderboard(out, definitions, ours, facts=None):
        seen["definitions"], seen["ours"] = [d.name for d in definitions], ours
        (out / "leaderboard").mkdir(parents=True, exist_ok=True)
        (out / "leaderboard" / f"{definition}.md").write_text("# table\n")
        import pandas as pd
        return {definition: pd.DataFrame()}

    monkeypatch.setattr(harness.report.leaderboard, "write_leaderboard", leaderboard)
    assert main(["public", "report", "--out", str(tmp_path)]) == 0
    # ours has no trace there (a run stopped early): no win rates against it, said
    assert seen == {"definitions": [definition], "ours": {definition: None}}
    assert "our solution gdn-harness-decode has no trace" in capsys.readouterr().out
    md = (tmp_path / "leaderboard" / f"{definition}.md").read_text()
    assert f"- {traced.name} (" not in md                        # it has a trace: not listed as not run
    assert f"- {unrunnable.name} ({unrunnable.repo}@{unrunnable.commit[:12]}): does not run on sm_90" in md
    assert f"- {entries[1].name} ({entries[1].repo}@{entries[1].commit[:12]}): no trace in this folder" in md
    ours_trace = dict(trace, solution="gdn-harness-decode")
    with open(tmp_path / "traces" / "a" / "gdn" / f"{definition}.jsonl", "a") as f:
        f.write(json.dumps(ours_trace) + "\n")
    assert main(["public", "report", "--out", str(tmp_path)]) == 0
    assert seen["ours"] == {definition: "gdn-harness-decode"}
    assert main(["public", "report", "--out", str(tmp_path / "empty")]) == 2


def test_public_run_on_the_cpu_is_refused_with_the_command_that_checks_an_entry_there(tmp_path, capsys):
    rc = main(["public", "run", "--device", "cpu", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "the public run times kernels on a GPU" in err
    assert f"gdn-harness eval --solution {tmp_path / 'cache'}/<definition>/<name>.json --device cpu" in err
