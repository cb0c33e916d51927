"""Scratch folders named after their process: a later process removes those whose process is gone (a run or Ray
actor ended by SIGKILL leaves its children's logs or payload copies behind), and no other."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.eval.pool import LOGS, ChildPool
from harness.eval.scratch import own_scratch


def test_a_new_pool_removes_the_log_folders_of_gone_processes_only(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()    # a pid that has ended
    left = tmp_path / f"{LOGS}{gone}-abc"
    left.mkdir()
    (left / "child-1.log").write_text("a killed run's child log")
    mine = Path(own_scratch(LOGS))                     # this (live) process's
    other = tmp_path / f"{LOGS}old_random_name"        # not named after a process: not ours to judge
    other.mkdir()
    with ChildPool("process") as pool:
        assert Path(pool.log_dir).parent == tmp_path and Path(pool.log_dir).name.startswith(f"{LOGS}{os.getpid()}-")
        assert not left.exists() and mine.is_dir() and other.is_dir()
    assert not Path(pool.log_dir).exists()
