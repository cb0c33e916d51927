"""Provenance of a run: hardware, library versions, harness commit, timer, inputs."""
import functools
import hashlib
import importlib.metadata
import os
import platform
import subprocess

import harness
from harness import REPO



@functools.cache
def harness_commit():
    """The git commit of the harness; GDN_HARNESS_COMMIT names it where the tree has no .git (a copy).

    A tree with uncommitted changes to tracked files reads COMMIT-dirty.DIGEST, DIGEST being the first 12 hex
    digits of the sha256 of `git diff --binary COMMIT`: a commit whose tree ran there gives the same digest for
    `git diff --binary COMMIT THAT_COMMIT`, so the label still names what ran."""
    if os.environ.get("GDN_HARNESS_COMMIT"):
        return os.environ["GDN_HARNESS_COMMIT"]
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() or "unknown"
        diff = subprocess.run(["git", "-C", str(REPO), "diff", "--binary", "HEAD"], capture_output=True,
                              timeout=30).stdout
        return commit + (f"-dirty.{hashlib.sha256(diff).hexdigest()[:12]}" if diff else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_version(distribution):
    """The installed version of a distribution (pip's name), or None; without importing it."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _version(module):
    try:
        return __import__(module).__version__
    except Exception:
        return None


@functools.cache
def hardware(device):
    import torch
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU {platform.machine()}"


@functools.cache
def libs(device):
    import torch
    out = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("triton", "flashinfer", "numpy"):
        v = _version(mod)
        if v:
            out[mod] = v
    if device.startswith("cuda") and torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
        props = torch.cuda.get_device_properties(torch.device(device))
        out["sm_count"] = str(props.multi_processor_count)
        out["compute_capability"] = f"{props.major}.{props.minor}"
        try:
            out["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=20).stdout.split("\n")[0].strip()
        except (OSError, subprocess.SubprocessError):
            pass
    out["harness"] = f"{harness.__version__}+{harness_commit()}"
    return out
