"""The CLI end to end: official-format traces, selectors, a killed run that resumes without loss."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main, select_workloads
from harness.data.dataset import Dataset
from harness.data.jsonio import DataError
from tests.toy import make_toy_root, toy_solution

REPO = Path(__file__).resolve().parent.parent


def test_selectors():
    ws = Dataset().workloads(Dataset().definition("gdn_decode_qk4_v8_d128_k_last"))
    assert [w.uuid for w in select_workloads(ws, "0-2")] == [w.uuid for w in ws[:3]]
    assert [w.uuid for w in select_workloads(ws, "5,1-2,5")] == [ws[5].uuid, ws[1].uuid, ws[2].uuid]
    assert select_workloads(ws, ws[7].uuid[:8])[0].uuid == ws[7].uuid
    with pytest.raises(DataError, match="outside 0-53"):
        select_workloads(ws, "50-60")
    with pytest.raises(DataError, match="'5-2' is empty: it starts after it ends") as exc:
        select_workloads(ws, "5-2")
    assert exc.value.hint == "write it low-high, e.g. 2-5"
    with pytest.raises(DataError, match="matches 0 workload uuids; need exactly one"):
        select_workloads(ws, "zzzz")
    some = [i for i, w in enumerate(ws) if w.uuid.startswith("a")]
    with pytest.raises(DataError, match=f"'a' matches {len(some)} workload uuids \\({some[0]}: {ws[some[0]].uuid[:8]}"):
        select_workloads(ws, "a")   # the candidates, with their indices


@pytest.mark.parametrize("definition,selector", [
    ("gdn_decode_qk4_v8_d128_k_last", "0-2"),
    ("gdn_prefill_qk4_v8_d128_k_last", "77daf91d,8e7ef744,685d26ff"),  # the three smallest (T = 6, 12, 13)
])
def test_reference_passes_on_cpu_and_writes_official_traces(tmp_path, capsys, definition, selector):
    rc = main(["eval", "--definition", definition, "--solution", "reference", "--device", "cpu",
               "--workloads", selector, "--out", str(tmp_path), "--quiet", "--iterations", "1", "--warmup", "0"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "3 PASSED, 0 not; inputs: stand-in" in out
    lines = (tmp_path / "traces" / "__builtin__" / "gdn" / f"{definition}.jsonl").read_text().splitlines()
    assert len(lines) == 3
    for line in map(json.loads, lines):
        ev = line["evaluation"]
        assert ev["status"] == "PASSED" and ev["environment"]["libs"]["inputs"] == "stand-in"
        assert ev["correctness"]["max_absolute_error"] == 0.0
        assert ev["performance"]["latency_ms"] > 0


def test_bad_solution_argument_is_refused(tmp_path, capsys):
    rc = main(["eval", "--definition", "gdn_decode_qk4_v8_d128_k_last", "--solution", str(tmp_path / "nope.json"),
               "--device", "cpu"])
    assert rc == 2 and "no such solution file or folder" in capsys.readouterr().err


def test_killed_run_loses_nothing_and_resumes(tmp_path):
    root = make_toy_root(tmp_path / "toy")
    flag = tmp_path / "slow"
    flag.touch()
    body = f"""
    import os, time
    def run(x, y, alpha, z):
        if x.shape[0] == 4 and os.path.exists({str(flag)!r}):
            time.sleep(60)
        z.copy_(x + alpha * y)
    """
    sol = tmp_path / "sol.json"
    sol.write_text(json.dumps(toy_solution("resumable", body)))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "harness", "eval", "--dataset", str(root), "--definition", "toy_axpy",
           "--solution", str(sol), "--device", "cpu", "--out", str(out), "--quiet", "--iterations", "1"]
    traces = out / "traces" / "tester" / "toy" / "toy_axpy.jsonl"
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not (traces.exists() and traces.read_text().count("\n") >= 1):
        time.sleep(0.2)
    time.sleep(1.0)  # now inside the slow second workload
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = [json.loads(x) for x in traces.read_text().splitlines()]
    assert [t["workload"]["uuid"] for t in first] == ["w-random"]
    flag.unlink()
    done = subprocess.run(cmd + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 kept from an earlier run (same content, hardware and settings)" in done.stdout
    rows = [json.loads(x) for x in traces.read_text().splitlines()]
    assert sorted(t["workload"]["uuid"] for t in rows) == ["w-blob", "w-random", "w-standin"]
    assert all(t["evaluation"]["status"] == "PASSED" for t in rows)
    assert rows[0] == first[0]  # the trace written before the kill is intact
