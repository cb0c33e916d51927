"""`make eval --gpus N`: the workload shares, the children's arguments, and the merge of what the children
wrote back into the results folder (a fake child stands in for `gdn-harness full`, which needs a GPU)."""
import argparse
import json
import shutil
import textwrap

import pytest

from harness.data.dataset import Dataset
from harness.eval.shard import child_argv, merge, parse_shard, run_sharded, shard_workloads


def test_parse_shard():
    assert parse_shard("1/3") == (1, 3)
    for bad in ("3/3", "-1/2", "1", "a/b", "1/0"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_shard(bad)


@pytest.mark.parametrize("definition", ["gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_shares_partition_the_workloads_in_file_order_and_balance_the_cost(definition, n):
    ds = Dataset()
    workloads = ds.workloads(ds.definition(definition))
    shares = [shard_workloads(workloads, k, n) for k in range(n)]
    uuids = [w.uuid for share in shares for w in share]
    assert sorted(uuids) == sorted(w.uuid for w in workloads) and len(set(uuids)) == len(uuids)
    order = {w.uuid: i for i, w in enumerate(workloads)}
    for share in shares:
        assert [order[w.uuid] for w in share] == sorted(order[w.uuid] for w in share)
    size = lambda w: max(w.axes.values())  # noqa: E731
    top = max(size(w) for w in workloads)
    cost = [sum(1 + size(w) / top for w in share) for share in shares]
    assert max(cost) - min(cost) <= 2.0   # greedy largest-first: within one workload's cost (at most 2)


def test_child_arguments_replace_the_parents_gpu_out_and_jobs():
    argv = ["--out", "results/x", "--gpus", "2", "--definitions", "d", "--prepare-jobs=4", "--peers", "--gpus=2"]
    assert child_argv(argv, "/w/shard1", 1, 2, 3) == ["--definitions", "d", "--peers", "--out", "/w/shard1",
                                                      "--shard", "1/2", "--no-report", "--prepare-jobs", "3"]


def _folder(root):
    (root / "harness").mkdir(parents=True)
    (root / "traces" / "a" / "op").mkdir(parents=True)
    (root / "runs.jsonl").write_text('{"run": 0}\n')
    (root / "harness" / "d.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    (root / "traces" / "a" / "op" / "d.jsonl").write_text('{"t": 1}\n')
    (root / "reference_latency.json").write_text(json.dumps({"k1": 1.0}))
    return root


def test_merge_appends_what_each_copy_added_and_unions_the_reference_cache(tmp_path):
    out = _folder(tmp_path / "out")
    s0, s1 = tmp_path / "s0", tmp_path / "s1"
    shutil.copytree(out, s0)
    shutil.copytree(out, s1)
    with open(s0 / "traces" / "a" / "op" / "d.jsonl", "a") as f:
        f.write('{"t": "s0-1"}\n{"t": "s0-2"}\n')
    (s0 / "reference_latency.json").write_text(json.dumps({"k1": 1.0, "k2": 2.0}))
    (s1 / "traces" / "b" / "op").mkdir(parents=True)
    (s1 / "traces" / "b" / "op" / "d.jsonl").write_text('{"t": "s1-new"}\n')
    with open(s1 / "harness" / "d.jsonl", "a") as f:
        f.write('{"x": "s1"}\n{"x": "cut sh')              # a child killed mid-line: the partial line is dropped
    (s1 / "reference_latency.json").write_text(json.dumps({"k1": 9.0, "k3": 3.0}))
    added = merge(out, [s0, s1])
    assert added == {"traces/a/op/d.jsonl": 2, "traces/b/op/d.jsonl": 1, "harness/d.jsonl": 1}
    assert (out / "traces" / "a" / "op" / "d.jsonl").read_text() == '{"t": 1}\n{"t": "s0-1"}\n{"t": "s0-2"}\n'
    assert (out / "traces" / "b" / "op" / "d.jsonl").read_text() == '{"t": "s1-new"}\n'
    assert (out / "harness" / "d.jsonl").read_text() == '{"x": 1}\n{"x": 2}\n{"x": "s1"}\n'
    assert (out / "runs.jsonl").read_text() == '{"run": 0}\n'
    assert json.loads((out / "reference_latency.json").read_text()) == {"k1": 1.0, "k2": 2.0, "k3": 3.0}


def _folder_and_copy_with_a_run(tmp_path):
    """A results folder and a shard copy of it that appended one run line."""
    out = _folder(tmp_path / "out")
    shard = tmp_path / "s0"
    shutil.copytree(out, shard)
    with open(shard / "runs.jsonl", "a") as f:
        f.write('{"run": 1}\n')
    return out, shard


def test_merge_drops_a_partial_last_line_left_in_the_results_folder(tmp_path):
    out, shard = _folder_and_copy_with_a_run(tmp_path)
    with open(out / "runs.jsonl", "a") as f:
        f.write('{"run": "killed mid-li')
    assert merge(out, [shard]) == {"runs.jsonl": 1}
    assert (out / "runs.jsonl").read_text() == '{"run": 0}\n{"run": 1}\n'


@pytest.mark.parametrize("text,error", [('{"k1": 1.0, "k2"', "not valid JSON"), ("[1.0, 2.0]", "expected an object")])
def test_merge_names_a_damaged_reference_cache_and_writes_nothing(tmp_path, text, error):
    from harness.data.jsonio import DataError

    out, shard = _folder_and_copy_with_a_run(tmp_path)
    (shard / "reference_latency.json").write_text(text)
    with pytest.raises(DataError, match=f"s0/reference_latency.json: {error}"):
        merge(out, [shard])
    assert (out / "runs.jsonl").read_text() == '{"run": 0}\n'


def test_merge_refuses_a_folder_that_is_not_a_copy(tmp_path):
    out = _folder(tmp_path / "out")
    other = _folder(tmp_path / "other")
    (other / "runs.jsonl").write_text('{"run": "elsewhere"}\n{"run": 1}\n')
    good = tmp_path / "good"
    shutil.copytree(out, good)
    with open(good / "runs.jsonl", "a") as f:
        f.write('{"run": "good"}\n')
    with pytest.raises(RuntimeError, match="not copied"):
        merge(out, [good, other])
    assert (out / "runs.jsonl").read_text() == '{"run": 0}\n'   # nothing merged, not even the good copy


FAKE_CHILD = textwrap.dedent('''
    """Stands in for `gdn-harness full`: appends one trace line and one cache entry to its --out, as its shard."""
    import json, os, sys
    from pathlib import Path
    args = sys.argv[1:]
    out, shard = Path(args[args.index("--out") + 1]), args[args.index("--shard") + 1]
    k = int(shard.split("/")[0])
    trace = out / "traces" / "a" / "op" / "d.jsonl"
    with open(trace, "a") as f:
        f.write(json.dumps({"shard": shard, "gpu": os.environ["CUDA_VISIBLE_DEVICES"], "argv": args}) + "\\n")
    cache = json.loads((out / "reference_latency.json").read_text())
    cache[f"from-{k}"] = float(k)
    (out / "reference_latency.json").write_text(json.dumps(cache))
    print(f"progress {k}\\rdone {k}", flush=True)
    sys.exit(3 if k == 1 else 0)
''')


def test_run_sharded_runs_one_child_per_gpu_and_merges_even_when_one_fails(tmp_path, monkeypatch, capsys):
    (tmp_path / "fakechild.py").write_text(FAKE_CHILD)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    out = _folder(tmp_path / "out")
    rc = run_sharded(["--out", str(out), "--gpus", "2", "--peers"], out, 2, tmp_path / "work", 4, module="fakechild")
    assert rc == 3
    lines = [json.loads(x) for x in (out / "traces" / "a" / "op" / "d.jsonl").read_text().splitlines()]
    assert lines[0] == {"t": 1}
    assert sorted((x["shard"], x["gpu"]) for x in lines[1:]) == [("0/2", "5"), ("1/2", "7")]
    assert all(x["argv"][0] == "--peers" and "--gpus" not in x["argv"] for x in lines[1:])
    assert json.loads((out / "reference_latency.json").read_text()) == {"k1": 1.0, "from-0": 0.0, "from-1": 1.0}
    printed = capsys.readouterr().out
    assert "[gpu 5] progress 0" in printed and "[gpu 7] done 1" in printed   # carriage returns become lines
    assert "shard 1/2 exited with status 3" in printed
    assert (tmp_path / "work" / "shard1.log").read_bytes() == b"progress 1\rdone 1\n"
