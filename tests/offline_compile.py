"""Offline compiles (no GPU) for the lowering tests: a script run in a fresh process, so the interpreter mode and the
lowering knobs of the CPU tests do not leak into it; it prints one JSON line last, which is returned."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREAMBLE = r"""
import json, os, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
sys.path.insert(0, sys.argv[1])
from tests.solutions import load_solution
"""


def offline_env(tmp_path):
    """This process's environment without the interpreter mode and the lowering knobs, its Triton cache in
    tmp_path."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "DISABLE_MMA_V3", "DISABLE_MMA_V5")}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    return env


def compile_offline(script, args, tmp_path, timeout=600):
    """Run PREAMBLE + `script` with argv [repo root, *args]; its last stdout line, parsed as JSON."""
    env = offline_env(tmp_path)
    run = subprocess.run([sys.executable, "-c", PREAMBLE + script, str(ROOT), *map(str, args)], env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
