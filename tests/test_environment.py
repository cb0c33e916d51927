"""The harness label in every trace names the code that ran, also from a tree with uncommitted changes."""
import hashlib
import subprocess

from harness.eval import environment


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "commit.gpgsign=false", *args], check=True,
                          capture_output=True).stdout


def _label(monkeypatch, repo):
    monkeypatch.setattr(environment, "REPO", repo)
    monkeypatch.delenv("GDN_HARNESS_COMMIT", raising=False)
    environment.harness_commit.cache_clear()
    try:
        return environment.harness_commit()
    finally:
        environment.harness_commit.cache_clear()


def test_a_dirty_tree_is_labelled_by_its_diff_and_a_commit_of_that_tree_matches(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@t")
    _git(repo, "config", "user.name", "t")
    (repo / "kernel.py").write_text("BV = 8\n")
    _git(repo, "add", "kernel.py")
    _git(repo, "commit", "-qm", "a")
    base = _git(repo, "rev-parse", "--short=12", "HEAD").decode().strip()
    assert _label(monkeypatch, repo) == base

    (repo / "kernel.py").write_text("BV = 4\n")
    (repo / "untracked.txt").write_text("not part of the label\n")
    label = _label(monkeypatch, repo)
    commit, _, digest = label.partition("-dirty.")
    assert commit == base and len(digest) == 12 and int(digest, 16) >= 0

    _git(repo, "commit", "-qam", "b")       # the tree that ran, committed afterwards
    ran = _git(repo, "rev-parse", "HEAD").decode().strip()
    assert hashlib.sha256(_git(repo, "diff", "--binary", base, ran)).hexdigest()[:12] == digest
    (repo / "kernel.py").write_text("BV = 2\n")
    assert _label(monkeypatch, repo).partition("-dirty.")[2] != digest


def test_the_environment_variable_names_the_commit_where_there_is_no_git(monkeypatch):
    monkeypatch.setenv("GDN_HARNESS_COMMIT", "0483618")
    environment.harness_commit.cache_clear()
    try:
        assert environment.harness_commit() == "0483618"
    finally:
        environment.harness_commit.cache_clear()
