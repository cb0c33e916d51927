"""--ray: pairs on Ray actors (one local Ray instance for the module, 2 CPU actors, Triton's interpreter). The
verdicts are a local run's; an actor that dies or hangs fails its own pair only, with the official status, and is
replaced; a killed driver resumes with exactly one trace per pair."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.data.dataset import Dataset, read_traces, trace_path
from harness.data.solution import Solution
from harness.data.starter_kit import load_starter_kit
from harness.dist.cluster import RayOptions
from harness.dist.runner import choose
from harness.eval.child import TimingConfig
from harness.eval.loop import evaluate
from harness.eval.options import EvalOptions
from tests.toy import make_toy_root, toy_solution

# `make test` installs ray (the test extra); a GPU image may lack it, and `make test-gpu` collects this file too
ray = pytest.importorskip("ray", reason="ray is not installed (pip install '.[ray]')")

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "adversarial"
GOOD = "def run(x, y, alpha, z):\n    z.copy_(x + alpha * y)\n"
WRONG = "def run(x, y, alpha, z):\n    z.copy_(x - alpha * y)\n"
TOY_WORKLOADS = ["w-random", "w-blob", "w-standin"]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance of 2 CPUs for the module; its address."""
    ctx = ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", configure_logging=False,
                   log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield ctx.address_info["address"]
    ray.shutdown()


def _opts(out, ray_options=None, **kw):
    return EvalOptions(**{"device": "cpu", "out_dir": out, "timing": TimingConfig(0, 1, 1), "show_progress": False,
                          "profile_baseline": False, "reference_cache": out / "ref.json", "ray": ray_options, **kw})


def _toy(tmp_path, bodies):
    """The toy dataset, its definition and workloads, and one solution per {name: body of main.py}."""
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    definition = ds.definition("toy_axpy")
    sols = [Solution.from_json(toy_solution(name, body), name) for name, body in bodies.items()]
    return ds, definition, ds.workloads(definition), sols


def _verdicts(results):
    out = {}
    for r in results:
        ev = r.trace.evaluation
        c = ev.correctness
        errors = c and repr((c.max_absolute_error, c.max_relative_error))   # repr: NaN equals NaN
        out[(r.workload.uuid, r.solution.name)] = (ev.status.value, errors, ev.log.splitlines()[-1] if ev.log else "")
    return out


def _one_trace_per_pair(out, definition, sols, workloads):
    traces = [t for s in {s.author for s in sols} for t in read_traces(trace_path(out, s, definition.op_type,
                                                                                  definition.name))]
    assert sorted((t.workload.uuid, t.solution) for t in traces) == sorted(
        (w.uuid, s.name) for w in workloads for s in sols)
    return {(t.workload.uuid, t.solution): t for t in traces}


def test_an_idle_actor_keeps_to_its_solutions_and_spreads_new_ones():
    held = {"a": 1, "b": 1, "c": 0}
    assert choose(["a", "b", "c"], {"b"}, held) == 1          # the first pair of a solution it holds
    assert choose(["a", "c", "b"], set(), held) == 1          # else one no actor holds yet: its build goes here
    assert choose(["a", "b"], set(), {"a": 1, "b": 1}) == 0   # else the first in order


def test_verdicts_equal_a_local_run(cluster, tmp_path):
    corpus = {n: Solution.load(CORPUS / f"{n}.json") for n in ("exits_hard", "wrong_signature")}
    ds, definition, workloads, sols = _toy(tmp_path, {"good": GOOD, "wrong": WRONG})
    sols += list(corpus.values())
    workloads = workloads[:2]   # random and real inputs; each child that dies costs a start
    corpus_expected = json.loads((CORPUS / "expected.json").read_text())
    expected = {"good": "PASSED", "wrong": "INCORRECT_NUMERICAL", **{n: corpus_expected[n]["cpu"] for n in corpus}}
    ray_out, local_out = tmp_path / "ray", tmp_path / "local"
    on_ray = evaluate(ds, definition, workloads, sols, _opts(ray_out, RayOptions(cluster, 2)))
    local = evaluate(ds, definition, workloads, sols, _opts(local_out))
    assert _verdicts(on_ray) == _verdicts(local)
    assert {(w, s): v[0] for (w, s), v in _verdicts(on_ray).items()} == {
        (w.uuid, s.name): expected[s.name] for w in workloads for s in sols}
    assert [(r.workload.uuid, r.solution.name) for r in on_ray] == [(r.workload.uuid, r.solution.name) for r in local]
    traces = _one_trace_per_pair(ray_out, definition, sols, workloads)
    log = traces[("w-random", "exits_hard")].evaluation.log
    assert log.endswith("Worker process failed unexpectedly (exit code 7)")
    extras = [json.loads(x) for x in (ray_out / "harness" / "toy_axpy.jsonl").read_text().splitlines()]
    ran_on = {e["ran_on"] for e in extras if e["status"] != "COMPILE_ERROR"}   # a rejected one ran nowhere
    assert len(ran_on) == 2 and all("CPU actor" in x for x in ran_on)

    # a real definition: the example kit, whose payload crosses the object store as bytes
    ds = Dataset()
    decode = ds.definition("gdn_decode_qk4_v8_d128_k_last")
    small = ds.workloads(decode)[:2]
    kit = [load_starter_kit(REPO / "examples" / decode.name)]
    on_ray = evaluate(ds, decode, small, kit, _opts(tmp_path / "ray-decode", RayOptions(cluster, 2)))
    local = evaluate(ds, decode, small, kit, _opts(tmp_path / "local-decode"))
    assert _verdicts(on_ray) == _verdicts(local) and {v[0] for v in _verdicts(on_ray).values()} == {"PASSED"}


KILLABLE = """
import os, time
def run(x, y, alpha, z):
    if x.shape[0] == 4:   # w-blob: say who we are, then wait to be killed
        with open({mark!r} + ".tmp", "w") as f:
            f.write(f"{{os.getppid()}} {{os.getpid()}}")
        os.replace({mark!r} + ".tmp", {mark!r})
        time.sleep(60)
    z.copy_(x + alpha * y)
"""


def _kill_actor_when_marked(mark):
    """Kill the process that holds the child which wrote `mark` (its actor), then the child."""
    deadline = time.time() + 120
    while not mark.exists() and time.time() < deadline:
        time.sleep(0.1)
    actor, child = map(int, mark.read_text().split())
    os.kill(actor, signal.SIGKILL)
    time.sleep(1.0)
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.parametrize("how", ["actor killed mid-call", "os._exit in the actor"])
def test_a_dead_actor_fails_its_pair_only(cluster, tmp_path, how):
    mark = tmp_path / "mark"
    if how == "actor killed mid-call":
        body, isolation = KILLABLE.format(mark=str(mark)), "worker"
        killer = threading.Thread(target=_kill_actor_when_marked, args=(mark,), daemon=True)
        killer.start()
    else:   # in the actor's own process (--isolation none), so the call ends the actor
        body, isolation = "import os\ndef run(x, y, alpha, z):\n    if x.shape[0] == 4:\n        os._exit(3)\n" \
                          "    z.copy_(x + alpha * y)\n", "none"
    ds, definition, workloads, sols = _toy(tmp_path, {"dies": body, "good": GOOD})
    out = tmp_path / "out"
    results = evaluate(ds, definition, workloads, sols, _opts(out, RayOptions(cluster, 2), isolation=isolation))
    status = {(r.workload.uuid, r.solution.name): r.trace.evaluation for r in results}
    bad = status.pop(("w-blob", "dies"))
    assert bad.status.value == "RUNTIME_ERROR" and bad.log.splitlines()[-1].startswith(
        "Worker process failed unexpectedly")
    assert "Ray actor" in bad.log
    assert {ev.status.value for ev in status.values()} == {"PASSED"} and len(status) == 5
    _one_trace_per_pair(out, definition, sols, workloads)
    if mark.exists():   # the actors left removed the killed one's payload copies
        assert not list(Path(tempfile.gettempdir()).glob(f"gdn-ray-payloads-{mark.read_text().split()[0]}-*"))


def test_a_hung_actor_times_out(cluster, tmp_path):
    """The call sleeps in the actor's own process (--isolation none), so the actor stops answering: the driver kills
    it after --timeout plus the grace. (A child that sleeps is the pool's own TIMEOUT, as in a local run; with a short
    --timeout its start-up, on the clock in worker mode, would time out too on a loaded host.)"""
    sleeper = "import time\ndef run(x, y, alpha, z):\n    if x.shape[0] == 16:\n        time.sleep(3600)\n" \
              "    z.copy_(x + alpha * y)\n"
    ds, definition, workloads, sols = _toy(tmp_path, {"sleeper": sleeper, "good": GOOD})
    workloads = workloads[:2]
    out = tmp_path / "out"
    start = time.monotonic()
    results = evaluate(ds, definition, workloads, sols, _opts(out, RayOptions(cluster, 2, grace_s=1.0), timeout=4,
                                                              isolation="none"))
    assert time.monotonic() - start < 60
    status = {(r.workload.uuid, r.solution.name): r.trace.evaluation for r in results}
    hung = status.pop(("w-random", "sleeper"))
    assert hung.status.value == "TIMEOUT" and "did not answer within 5 s" in hung.log
    assert hung.log.splitlines()[-1] == "Evaluation timeout after 4 seconds for solution sleeper"
    assert {ev.status.value for ev in status.values()} == {"PASSED"} and len(status) == 3
    _one_trace_per_pair(out, definition, sols, workloads)


def test_a_killed_driver_resumes_with_one_trace_per_pair(cluster, tmp_path):
    root = make_toy_root(tmp_path / "toy")
    flag, pids = tmp_path / "slow", tmp_path / "pids"
    flag.touch()
    slow = f"""
    import os, time
    def run(x, y, alpha, z):
        if x.shape[0] != 16 and os.path.exists({str(flag)!r}):
            with open({str(pids)!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
            time.sleep(60)
        z.copy_(x + alpha * y)
    """
    args = []
    for name, body in {"slow": slow, "good": GOOD, "wrong": WRONG}.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(toy_solution(name, body)))
        args += ["--solution", str(tmp_path / f"{name}.json")]
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "harness", "eval", "--dataset", str(root), "--definition", "toy_axpy", *args,
           "--device", "cpu", "--out", str(out), "--quiet", "--ray", cluster, "--ray-actors", "2",
           "--no-reference-output-cache"]
    traces = out / "traces" / "tester" / "toy" / "toy_axpy.jsonl"
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (traces.exists() and traces.read_text().count("\n") >= 3 and pids.exists()):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pid in map(int, pids.read_text().split()):   # the children of the killed driver's actors
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    before = traces.read_text().splitlines()
    assert 3 <= len(before) < 9
    flag.unlink()
    done = subprocess.run([*cmd, "--exit-zero"], cwd=REPO, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{len(before)} kept from an earlier run (same content, hardware and settings)" in done.stdout
    rows = [json.loads(x) for x in traces.read_text().splitlines()]
    assert sorted((t["workload"]["uuid"], t["solution"]) for t in rows) == sorted(
        (w, s) for w in TOY_WORKLOADS for s in ("slow", "good", "wrong"))
    assert {t["solution"]: t["evaluation"]["status"] for t in rows} == {
        "slow": "PASSED", "good": "PASSED", "wrong": "INCORRECT_NUMERICAL"}
    assert rows[:len(before)] == [json.loads(x) for x in before]   # written before the kill: intact


def test_more_actors_than_the_cluster_holds_are_refused(cluster, tmp_path, capsys):
    root = make_toy_root(tmp_path / "toy")
    (tmp_path / "good.json").write_text(json.dumps(toy_solution("good", GOOD)))
    rc = main(["eval", "--dataset", str(root), "--definition", "toy_axpy", "--solution", str(tmp_path / "good.json"),
               "--device", "cpu", "--out", str(tmp_path / "out"), "--quiet", "--ray", cluster, "--ray-actors", "3"])
    assert rc == 2 and "the Ray cluster has 2" in capsys.readouterr().err


def test_without_ray_installed_it_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)   # `import ray` now fails as if it were not installed
    root = make_toy_root(tmp_path / "toy")
    (tmp_path / "good.json").write_text(json.dumps(toy_solution("good", GOOD)))
    rc = main(["eval", "--dataset", str(root), "--definition", "toy_axpy", "--solution", str(tmp_path / "good.json"),
               "--device", "cpu", "--out", str(tmp_path / "out"), "--ray"])
    err = capsys.readouterr().err
    assert rc == 2 and "Ray is not installed" in err and "pip install '.[ray]'" in err
    assert not (tmp_path / "out").exists()


AS_THE_DRIVER = """
import os
def run(x, y, alpha, z):
    # Ray's workers run at niceness 15 with OMP_NUM_THREADS=1; a child timed on an actor must not
    assert os.nice(0) == {nice}, f"niceness {{os.nice(0)}}"
    assert os.environ.get("OMP_NUM_THREADS") == {omp!r}, os.environ.get("OMP_NUM_THREADS")
    z.copy_(x + alpha * y)
"""


@pytest.mark.parametrize("omp", [None, "3"])
def test_an_actor_runs_its_children_as_a_local_run_does(cluster, tmp_path, monkeypatch, omp):
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    ds, definition, workloads, sols = _toy(tmp_path, {"as_driver": AS_THE_DRIVER.format(nice=os.nice(0), omp=omp)})
    results = evaluate(ds, definition, workloads[:1], sols, _opts(tmp_path / "ray", RayOptions(cluster, 1)))
    assert [r.trace.evaluation.status.value for r in results] == ["PASSED"], results[0].trace.evaluation.log
