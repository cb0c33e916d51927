"""harness.public: the facts file, fetching (from a folder, from a git repository, without network), what runs
where, and the `public` subcommand."""
import argparse
import json
import subprocess
from pathlib import Path

import pytest

import harness.public.commands
import harness.public.fetch
from harness.data.jsonio import DataError
from harness.public.entries import ENTRIES, PublicEntry, facts_from_manifest, load_entries
from harness.public.fetch import fetch
from harness.public.runs_here import TRITON_ON_CPU, public_solutions, runnable
from harness.data.solution import Solution

SHARED = Path("/work/shared/public")
DECODE = "gdn_decode_qk4_v8_d128_k_last"
KERNEL = "def run(q, k, v):\n    return q\n"


def entry(name, **kw):
    facts = dict(name=name, definition=DECODE, team="t", author="a", placement=None, repo="owner/repo",
                 commit="0" * 40, ref=None, path="sol", language="python", binding=None, dps=True,
                 entry_point="kernel.py::run", dependencies=[], runs_on_sm90="yes", sm90_reason="plain",
                 needs=[], reported_latency_us=None, reported_latency_note="not reported", source="s", note="n")
    return PublicEntry(**{**facts, **kw})


def solution_json(name, content=KERNEL):
    return {"name": name, "definition": DECODE, "author": "a",
            "spec": {"language": "python", "target_hardware": ["cuda"], "entry_point": "kernel.py::run"},
            "sources": [{"path": "kernel.py", "content": content}]}


@pytest.fixture
def folder(tmp_path):
    """A pre-packed folder: one good JSON, one our loader refuses (an empty source file); a third entry has none."""
    root = tmp_path / "public"
    (root / DECODE).mkdir(parents=True)
    (root / DECODE / "good.json").write_text(json.dumps(solution_json("good")))
    (root / DECODE / "empty.json").write_text(json.dumps(solution_json("empty", content="")))
    return root, [entry("good"), entry("empty"), entry("absent")]


def test_fetch_from_folder_copies_the_good_and_records_the_rest(folder, tmp_path):
    root, entries = folder
    cache = tmp_path / "cache"
    (cache / DECODE).mkdir(parents=True)
    (cache / DECODE / "empty.json").write_text("stale")   # from an earlier fetch: must not survive a refusal
    good, empty, absent = fetch(entries, cache, source=root)
    assert (good.status, good.path) == ("fetched", cache / DECODE / "good.json")
    assert Solution.load(good.path).name == "good"
    assert empty.status == "refused" and "'kernel.py' is empty" in empty.reason and empty.path is None
    assert empty.earlier == "removed" and "removed the copy fetched earlier, no longer valid" in empty.earlier_said()
    assert absent.status == "missing" and "absent.json does not exist" in absent.reason
    assert sorted(p.name for p in (cache / DECODE).iterdir()) == ["good.commit", "good.json"]
    assert (cache / DECODE / "good.commit").read_text() == "0" * 40 + "\n"   # the commit the facts pin
    solutions, left_out = public_solutions(cache, DECODE, entries)
    assert [s.name for s in solutions] == ["good"]
    assert [(e.name, why.split(":")[0]) for e, why in left_out] == [("empty", "not fetched"), ("absent", "not fetched")]


def test_fetch_from_folder_refuses_a_json_that_is_another_solution(folder, tmp_path):
    root, _ = folder
    (root / DECODE / "other.json").write_text(json.dumps(solution_json("good")))
    (result,) = fetch([entry("other")], tmp_path / "c", source=root)
    assert result.status == "refused" and "holds solution 'good'" in result.reason


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def upstream(tmp_path):
    """A local git repository standing in for GitHub: a solution folder with a subfolder, a cache, a binary and a
    non-UTF-8 file, committed; then a second commit that changes the kernel (the entry pins the first)."""
    repo = tmp_path / "upstream"
    sol = repo / "sol"
    (sol / "helpers").mkdir(parents=True)
    (sol / "__pycache__").mkdir()
    (sol / "kernel.py").write_text("from .helpers.util import f\n" + KERNEL)
    (sol / "helpers" / "util.py").write_text("def f():\n    return 1\n")
    (sol / "__pycache__" / "kernel.cpython-312.pyc").write_bytes(b"\0\1")
    (sol / "ext.so").write_bytes(b"\x7fELF")
    (sol / "figure.png").write_bytes(b"\x89PNG\r\n\xff\xfe")
    (repo / "single.py").write_text(KERNEL)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", "-A")
    first = git(repo, "commit", "-q", "-m", "first")
    (sol / "kernel.py").write_text("# later\n" + KERNEL)
    git(repo, "commit", "-q", "-am", "later")
    return repo, first


def test_fetch_from_git_packs_the_folder_at_its_commit(upstream, tmp_path, monkeypatch):
    repo, first = upstream
    monkeypatch.setattr(harness.public.fetch, "url_for", lambda name: str(repo))
    clones = []
    real_clone = harness.public.fetch.clone
    monkeypatch.setattr(harness.public.fetch, "clone", lambda *a: clones.append(a[0]) or real_clone(*a))
    entries = [entry("folder", commit=first, dps=False, dependencies=["apache-tvm-ffi"]),
               entry("one-file", commit=first, path="single.py", entry_point="single.py::run"),
               entry("gone", commit=first, path="nowhere")]
    cache = tmp_path / "cache"
    folder, one_file, gone = fetch(entries, cache)
    assert clones == ["owner/repo"]                      # one clone per repository
    assert (cache / "repos" / "owner__repo" / ".git").is_dir()
    assert folder.status == "fetched", folder.reason
    sol = Solution.load(folder.path)
    assert [s.path for s in sol.sources] == ["helpers/util.py", "kernel.py"]
    assert sol.sources[1].content.startswith("from .helpers")   # the pinned commit, not the later one
    assert (sol.spec.entry_point, sol.spec.language, sol.spec.target_hardware) == ("kernel.py::run", "python", ["cuda"])
    assert (sol.spec.destination_passing_style, sol.spec.dependencies, sol.spec.binding) == (
        False, ["apache-tvm-ffi"], None)
    assert (sol.name, sol.author) == ("folder", "a") and f"owner/repo@{first[:12]} sol" in sol.description
    assert one_file.status == "fetched" and [s.path for s in Solution.load(one_file.path).sources] == ["single.py"]
    assert gone.status == "missing" and "has no nowhere" in gone.reason


def test_fetch_from_git_an_unknown_commit_is_not_fetched(upstream, tmp_path, monkeypatch):
    repo, _ = upstream
    monkeypatch.setattr(harness.public.fetch, "url_for", lambda name: str(repo))
    (result,) = fetch([entry("x", commit="f" * 40)], tmp_path / "cache")
    assert result.status == "not fetched" and f"git checkout {'f' * 40}" in result.reason


def test_a_commit_the_facts_pin_after_the_clone_was_made_is_fetched_into_it(upstream, tmp_path, monkeypatch):
    repo, first = upstream
    monkeypatch.setattr(harness.public.fetch, "url_for", lambda name: str(repo))
    cache = tmp_path / "cache"
    assert fetch([entry("folder", commit=first)], cache)[0].status == "fetched"   # the clone is made
    (repo / "sol" / "kernel.py").write_text("# pinned later\n" + KERNEL)
    git(repo, "commit", "-q", "-am", "pinned later")
    later = git(repo, "rev-parse", "HEAD")
    (result,) = fetch([entry("folder", commit=later)], cache)
    assert result.status == "fetched", result.reason
    assert Solution.load(result.path).sources[1].content.startswith("# pinned later")
    assert result.path.with_suffix(".commit").read_text() == later + "\n"


def test_fetch_from_git_a_failed_clone_after_a_good_one_is_that_repository_only(upstream, tmp_path, monkeypatch):
    repo, first = upstream
    monkeypatch.setattr(harness.public.fetch, "url_for",
                        lambda name: str(repo if name == "owner/repo" else tmp_path / "gone"))
    good, gone = fetch([entry("good", commit=first), entry("gone", repo="other/repo")], tmp_path / "cache")
    assert good.status == "fetched"
    assert gone.status == "not fetched" and gone.reason.startswith("git clone ") and "network" not in gone.reason


def test_fetch_without_network_says_so_for_every_entry(tmp_path, monkeypatch):
    monkeypatch.setattr(harness.public.fetch, "url_for", lambda name: str(tmp_path / "no-such-host" / name))
    clones = []
    real_clone = harness.public.fetch.clone
    monkeypatch.setattr(harness.public.fetch, "clone", lambda *a: clones.append(a[0]) or real_clone(*a))
    results = fetch([entry("a"), entry("b", repo="other/repo")], tmp_path / "cache")
    assert [r.status for r in results] == ["not fetched", "not fetched"]
    assert clones == ["owner/repo"]                      # the first failure stops further attempts
    assert results[0].reason == results[1].reason
    assert results[0].reason.startswith("network needed: git clone ") and "failed: " in results[0].reason
    assert results[0].reason.endswith("use --from DIR with pre-packed JSONs")


def test_fetch_without_git(tmp_path, monkeypatch):
    monkeypatch.setattr(harness.public.fetch.shutil, "which", lambda name: None)
    (result,) = fetch([entry("a")], tmp_path / "cache")
    assert result.status == "not fetched" and result.reason.startswith("network needed: git is not installed")


def test_runnable():
    triton, cuda, python = entry("t", language="triton"), entry("c", language="cuda"), entry("p")
    tvm_python = entry("p2", needs=["tvm-ffi"])
    assert runnable(triton, None) == (False, TRITON_ON_CPU)
    assert runnable(cuda, None) == (False, "needs a CUDA GPU")
    assert runnable(tvm_python, None) == (False, "needs a CUDA GPU")
    assert runnable(python, None)[0]
    blackwell = entry("b", runs_on_sm90="no", sm90_reason="tcgen05")
    assert runnable(blackwell, (9, 0)) == (False, "does not run on sm_90: tcgen05")
    assert runnable(blackwell, (10, 0)) == (True, "")
    assert runnable(triton, (9, 0)) == (True, "")
    ok, why = runnable(entry("u", runs_on_sm90="unknown", sm90_reason="CuTe-DSL"), (9, 0))
    assert ok and "may not run on sm_90: CuTe-DSL" in why
    solutions, left_out = public_solutions("/nonexistent", DECODE, [blackwell], device_capability=(9, 0))
    assert solutions == [] and left_out[0][1] == "not runnable here: does not run on sm_90: tcgen05"


def test_facts_file_loads_with_40_unique_entries():
    entries = load_entries()
    assert len(entries) == 40 and len({e.name for e in entries}) == 40
    assert {e.runs_on_sm90 for e in entries} <= {"yes", "no", "unknown"}
    assert all(e.definition in (DECODE, "gdn_prefill_qk4_v8_d128_k_last") for e in entries)
    assert json.loads(ENTRIES.read_text())["not_packed"]


def test_load_entries_refuses_unknown_keys(tmp_path):
    bad = tmp_path / "entries.json"
    bad.write_text(json.dumps({"entries": [{"name": "x"}]}))
    with pytest.raises(DataError, match="exactly the keys"):
        load_entries(bad)


@pytest.mark.skipif(not SHARED.is_dir(), reason="no /work/shared/public here")
def test_facts_file_is_what_the_manifest_gives():
    manifest = json.loads((SHARED / "manifest.json").read_text())
    not_packed = json.loads((SHARED / "not_packed.json").read_text())
    assert facts_from_manifest(manifest, not_packed) == json.loads(ENTRIES.read_text())


@pytest.mark.skipif(not SHARED.is_dir(), reason="no /work/shared/public here")
def test_fetch_from_the_shared_folder(tmp_path):
    results = fetch(load_entries(), tmp_path, source=SHARED)
    assert len(results) == 40 and all(r.status in ("fetched", "missing", "refused") for r in results)
    assert all(r.reason for r in results if r.status != "fetched")


def parser():
    p = argparse.ArgumentParser()
    harness.public.commands.add_public_parser(p.add_subparsers(dest="command"))
    return p


def test_cli_fetch_and_list(folder, tmp_path, monkeypatch, capsys):
    root, entries = folder
    monkeypatch.setattr(harness.public.commands, "load_entries", lambda: entries)
    monkeypatch.setattr(harness.public.commands, "device_capability_here", lambda: None)
    cache = tmp_path / "cache"
    args = parser().parse_args(["public", "fetch", "--from", str(root), "--cache", str(cache)])
    assert args.func(args) == 1                          # not every entry was fetched
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["fetched", "good"]
    assert out[1].startswith("refused      empty: ") and out[2].startswith("missing      absent: ")
    assert out[3].startswith("3 entries: 1 fetched, 1 missing, 1 refused")
    args = parser().parse_args(["public", "list", "--cache", str(cache)])
    assert args.func(args) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:3] == ["name", "definition", "language/binding"]
    assert rows[1].split()[:5] == ["good", DECODE, "python/-", "yes", "yes"]
    assert rows[2].split()[3:5] == ["no", "yes"] and "not fetched" in rows[2]   # runnable: a CPU runs pure Python
    assert rows[-1] == "device here: CPU (no CUDA GPU)"
    args = parser().parse_args(["public", "fetch", "--from", str(tmp_path / "none"), "--cache", str(cache)])
    with pytest.raises(DataError, match="no such folder"):
        args.func(args)


def test_cli_fetch_prints_a_repeated_reason_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(harness.public.commands, "load_entries", lambda: [entry("a"), entry("b")])
    monkeypatch.setattr(harness.public.fetch, "url_for", lambda name: str(tmp_path / "no-such-host"))
    args = parser().parse_args(["public", "fetch", "--cache", str(tmp_path / "cache")])
    assert args.func(args) == 1
    out = capsys.readouterr().out.splitlines()
    assert "network needed: git clone" in out[0] and out[1] == "not fetched  b: (same as above)"
    assert out[2].startswith("2 entries: 2 not fetched")


def fetch_cli(cache, source=None):
    args = parser().parse_args(["public", "fetch", "--cache", str(cache), *(["--from", str(source)] if source else [])])
    return args.func(args)


def test_cli_fetch_without_network_keeps_the_copies_fetched_earlier(folder, tmp_path, monkeypatch, capsys):
    root, (good, empty, absent) = folder
    (root / DECODE / "other.json").write_text(json.dumps(solution_json("other")))
    entries = [good, entry("other"), empty, absent]
    monkeypatch.setattr(harness.public.commands, "load_entries", lambda: entries)
    cache = tmp_path / "cache"
    assert fetch_cli(cache, root) == 1
    before = {p: p.read_bytes() for p in cache.rglob("*.json")}
    assert sorted(p.name for p in before) == ["good.json", "other.json"]
    capsys.readouterr()
    monkeypatch.setattr(harness.public.fetch, "url_for", lambda name: str(tmp_path / "no-such-host"))
    assert fetch_cli(cache) == 1                         # nothing was fetched now: still not a success
    out = capsys.readouterr().out.splitlines()
    assert {p: p.read_bytes() for p in cache.rglob("*.json")} == before
    assert out[0].startswith("not fetched  good: network needed: git clone ")
    assert out[0].endswith("; kept the copy fetched earlier")
    assert out[1] == "not fetched  other: (same as above); kept the copy fetched earlier"
    assert out[2:4] == ["not fetched  empty: (same as above)", "not fetched  absent: (same as above)"]
    assert out[4].startswith("4 entries: 4 not fetched; copies fetched earlier: 2 kept (cache ")
    assert [s.name for s in public_solutions(cache, DECODE, entries)[0]] == ["good", "other"]


@pytest.mark.parametrize("name, commit, reason", [
    ("b", "0" * 40, "holds solution 'b'"),                                # the facts' a is another solution now
    ("a", "1" * 40, "packed from 111111111111, the facts pin 000000000000"),   # the facts pin a later commit
    ("a", None, "no record of the commit it was packed from"),            # fetched before commits were recorded
])
def test_fetch_without_network_removes_a_copy_the_facts_refuse_and_says_so(tmp_path, monkeypatch, name, commit,
                                                                           reason):
    cache = tmp_path / "cache"
    (cache / DECODE).mkdir(parents=True)
    (cache / DECODE / "a.json").write_text(json.dumps(solution_json(name)))
    if commit:
        (cache / DECODE / "a.commit").write_text(commit + "\n")
    assert public_solutions(cache, DECODE, [entry("a")])[1][0][1].startswith(f"refused: {cache / DECODE / 'a.json'}")
    monkeypatch.setattr(harness.public.fetch, "url_for", lambda name: str(tmp_path / "no-such-host"))
    (result,) = fetch([entry("a")], cache)
    assert result.status == "not fetched" and result.earlier == "removed" and result.path is None
    assert reason in result.earlier_reason and not list((cache / DECODE).iterdir())


def test_cli_fetch_from_a_folder_with_a_bad_json_keeps_the_good_copy(folder, tmp_path, monkeypatch, capsys):
    root, (good, _, absent) = folder
    entries = [good, absent]
    monkeypatch.setattr(harness.public.commands, "load_entries", lambda: entries)
    cache = tmp_path / "cache"
    fetch_cli(cache, root)
    kept = (cache / DECODE / "good.json").read_bytes()
    later = tmp_path / "later"
    (later / DECODE).mkdir(parents=True)
    (later / DECODE / "good.json").write_text(json.dumps(solution_json("good", content="")))   # refused
    capsys.readouterr()
    assert fetch_cli(cache, later) == 1
    out = capsys.readouterr().out.splitlines()
    assert (cache / DECODE / "good.json").read_bytes() == kept
    assert out[0].startswith("refused      good: ") and "'kernel.py' is empty" in out[0]
    assert out[0].endswith("; kept the copy fetched earlier")
    assert out[1].startswith("missing      absent: ") and "kept" not in out[1]
    assert out[2].startswith("2 entries: 1 missing, 1 refused; copies fetched earlier: 1 kept (cache ")
    (result, _) = fetch(entries, cache, source=later)
    assert (result.status, result.earlier, result.path) == ("refused", "kept", cache / DECODE / "good.json")


def test_fetch_from_a_folder_one_level_too_deep_points_at_its_parent(folder, tmp_path):
    root, entries = folder
    cache = tmp_path / "cache"
    fetch(entries, cache, source=root)
    with pytest.raises(DataError, match=rf"one level too deep: point --from at its parent folder \({root}\)"):
        fetch(entries, cache, source=root / DECODE)           # named after a definition
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "good.json").write_text(json.dumps(solution_json("good")))
    with pytest.raises(DataError, match=rf"one level too deep: point --from at its parent folder \({tmp_path}\)"):
        fetch(entries, cache, source=flat)                    # an entry's JSON right in it
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(DataError, match="holds no folder named after a definition") as refused:
        fetch(entries, cache, source=tmp_path / "elsewhere")
    assert "too deep" not in str(refused.value)
    assert (cache / DECODE / "good.json").is_file()           # refused before any work: the cache is as it was


def test_cli_fetch_from_names_the_jsons_it_leaves_out_and_a_missing_definition_folder_once(folder, tmp_path,
                                                                                           monkeypatch, capsys):
    """A JSON named after no entry was passed over in silence; a definition folder missing from --from gave one long
    'missing' line per entry, each naming its own file."""
    root, (good, _, _) = folder
    (root / DECODE / "unknown-entry.json").write_text(json.dumps(solution_json("unknown-entry")))
    prefill = [entry(f"p{i}", definition="gdn_prefill_qk4_v8_d128_k_last") for i in range(3)]
    monkeypatch.setattr(harness.public.commands, "load_entries", lambda: [good, *prefill])
    fetch_cli(tmp_path / "cache", root)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:2]] == [f"left out     {root / DECODE / name}.json"
                                                       for name in ("empty", "unknown-entry")]
    assert out[3].endswith(f"p0: {root / 'gdn_prefill_qk4_v8_d128_k_last'} does not exist")
    assert out[4].endswith("p1: (same as above)") and out[5].endswith("p2: (same as above)")
