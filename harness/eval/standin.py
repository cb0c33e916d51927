"""Stand-in blobs for workloads whose safetensors files are not public (GDN.md, 'Stand-in inputs').

Deterministic: each tensor is drawn from numpy's PCG64 seeded by sha256(uuid:tensor_key), so the same
workload gives the same bytes on any machine. Files carry a metadata mark so reports can say
"stand-in"; a file without the mark is treated as real and never overwritten.
"""
import hashlib
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

STANDIN_MARK = "gdn-harness-standin"
STANDIN_VERSION = "1"
# GDN state entries of N(0, 1): outputs around 0.1 (10x atol) and state updates around 0.05
# relative to it, so wrong recurrences fail the official check (tests/test_mutations.py).
STATE_STD = 1.0


def _rng(uuid, key):
    seed = int.from_bytes(hashlib.sha256(f"{uuid}:{key}".encode()).digest()[:8], "little")
    return np.random.Generator(np.random.PCG64(seed))


def _normal(rng, shape):
    return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))


def _cu_seqlens(rng, total, count):
    """A seeded split of `total` tokens into `count` non-empty sequences of varied length."""
    if count < 1 or total < count:
        raise ValueError(f"cannot split {total} tokens into {count} non-empty sequences")
    cuts = np.sort(rng.choice(np.arange(1, total), size=count - 1, replace=False)) if count > 1 else []
    return torch.tensor([0, *[int(c) for c in cuts], total], dtype=torch.int64)


def gdn_tensor(name, shape, dtype, rng, axes):
    """Realistic GDN inputs: what the model feeds its kernel (GDN.md)."""
    if name in ("q", "k"):
        x = _normal(rng, shape)
        return (x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)).to(dtype)
    if name == "A_log":
        return torch.from_numpy(np.log(rng.uniform(1.0, 16.0, shape)).astype(np.float32)).to(dtype)
    if name == "dt_bias":
        dt = np.exp(rng.uniform(math.log(1e-3), math.log(1e-1), shape))
        return torch.from_numpy(np.log(np.expm1(dt)).astype(np.float32)).to(dtype)  # inverse softplus
    if name == "state":
        return (_normal(rng, shape) * STATE_STD).to(dtype)
    if name == "cu_seqlens":
        return _cu_seqlens(rng, axes["total_seq_len"], shape[0] - 1).to(dtype)
    return None  # v, a, b and anything else: the generic draw


def generic_tensor(shape, dtype, rng):
    if dtype == torch.bool:
        return torch.from_numpy(rng.integers(0, 2, shape).astype(np.bool_))
    if not dtype.is_floating_point:
        lo, hi = (-128, 128) if dtype == torch.int8 else (-1024, 1024)
        return torch.from_numpy(rng.integers(lo, hi, shape)).to(dtype)
    x = _normal(rng, shape)
    if dtype.itemsize == 1:  # fp8/fp4: clamped like the official generator
        x = x.clamp(-2, 2)
    return x.to(dtype)


def synthesize_blob(path, tensors_wanted, definition, workload, axis_values):
    """Write one stand-in safetensors file with the tensors {key: (input_name, shape, dtype)}."""
    from safetensors.torch import save_file

    tensors = {}
    for key, (name, shape, dtype) in tensors_wanted.items():
        rng = _rng(workload.uuid, key)
        t = gdn_tensor(name, shape, dtype, rng, axis_values) if definition.op_type == "gdn" else None
        tensors[key] = (t if t is not None else generic_tensor(shape, dtype, rng)).contiguous()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    # One metadata key only: safetensors writes metadata from a hash map, so several keys would land
    # in a varying order and the bytes would differ between runs.
    save_file(tensors, tmp, metadata={STANDIN_MARK: f"v{STANDIN_VERSION} uuid={workload.uuid}"})
    os.chmod(tmp, 0o644)
    if path.exists():  # someone else wrote it meanwhile: keep theirs
        os.unlink(tmp)
    else:
        os.replace(tmp, path)
