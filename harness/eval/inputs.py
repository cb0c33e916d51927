"""Materialise a workload's inputs the way the official evaluator does, and allocate DPS outputs."""
from dataclasses import dataclass

import torch

from harness.eval import standin
from harness.data.jsonio import DataError

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
                "bool": torch.bool}   # float64 and uint8 are refused at load (not in FIB's DType enum)
for _name in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn_x2"):
    if hasattr(torch, _name):
        TORCH_DTYPES[_name] = getattr(torch, _name)


def torch_dtype(name):
    if name not in TORCH_DTYPES:
        raise DataError("definition", f"dtype {name!r} is not supported by this torch build")
    return TORCH_DTYPES[name]


@dataclass
class LoadedBlobs:
    tensors: dict           # input name -> CPU tensor
    standin: bool           # True if any blob used is a stand-in we synthesised
    files: list             # blob files read


class BlobFault(DataError):
    """A blob file that is there but cannot give its workload's inputs: a tensor_key it lacks, a tensor of
    another shape or dtype, an unreadable file or a git-LFS pointer. Officially that workload's baseline fails
    and the workload is skipped (payloads.py turns this into ReferenceFailed); a missing file is not one (it is
    synthesised as a stand-in, or refused when stand-ins are off)."""


LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


def _is_lfs_pointer(path):
    try:
        with open(path, "rb") as f:
            return f.read(len(LFS_POINTER)) == LFS_POINTER
    except OSError:
        return False


def load_blobs(dataset, definition, workload, synthesize=True):
    """Read the safetensors inputs (CPU), writing stand-ins for missing files; check key, shape and dtype as the
    official loader does (a fault is a BlobFault)."""
    from safetensors import safe_open

    axes = definition.axis_values(workload.axes)
    wanted = {}  # path -> {key: (name, shape, dtype)}
    for name, spec in workload.inputs.items():
        if spec.type != "safetensors":
            continue
        tspec = definition.inputs[name]
        wanted.setdefault(spec.path, {})[spec.tensor_key] = (
            name, definition.shape_of(tspec, axes) or [], torch_dtype(tspec.dtype))
    tensors, any_standin, files = {}, False, []
    for rel, keys in wanted.items():
        path = dataset.blob_path(rel)
        if not path.exists():
            if not synthesize:
                raise DataError(path, "blob file is missing", "run without --no-standin to synthesise stand-ins")
            standin.synthesize_blob(path, keys, definition, workload, axes)
        files.append(path)
        if _is_lfs_pointer(path):  # the official loader runs `git lfs pull` on it; this harness does not
            raise BlobFault(path, "the file is a git-LFS pointer, not the blob",
                            "run `git lfs pull` in the dataset's repository; the official loader pulls it itself")
        try:
            with safe_open(str(path), framework="pt") as f:
                is_standin = standin.STANDIN_MARK in (f.metadata() or {})
                any_standin |= is_standin
                present = set(f.keys())
                for key, (name, shape, dtype) in keys.items():
                    if key not in present:
                        raise BlobFault(path, f"tensor_key {key!r} (input '{name}') not in file; has "
                                              f"{sorted(present)}")
                    t = f.get_tensor(key)
                    if list(t.shape) != list(shape) or t.dtype != dtype:
                        raise BlobFault(path, f"tensor {key!r} (input '{name}') is {tuple(t.shape)} {t.dtype}; "
                                              f"the definition wants {tuple(shape)} {dtype}",
                                        "it is a stand-in made for other axes: delete it to re-synthesise"
                                        if is_standin else None)
                    tensors[name] = t
        except DataError:
            raise
        except Exception as exc:  # truncated or corrupt file
            raise BlobFault(path, f"cannot read safetensors file: {exc}",
                            "delete it to re-synthesise a stand-in, or restore the real blob") from None
    return LoadedBlobs(tensors, any_standin, files)


def random_tensor(shape, dtype, device, generator):
    """Official random distributions: normal floats, fp8 clamped to [-2,2], bool {0,1}, ints bounded."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device, generator=generator).bool()
    if not dtype.is_floating_point:
        lo, hi = (-128, 128) if dtype == torch.int8 else (-1024, 1024)
        return torch.randint(lo, hi, shape, device=device, generator=generator).to(dtype)
    x = torch.randn(shape, device=device, generator=generator)
    if dtype.itemsize == 1:
        x = x.clamp(-2, 2)
    return x.to(dtype)


def materialize(definition, workload, blobs, device, trial, seed):
    """Inputs in definition order for one trial. Blobs are copied (identical every trial); random inputs
    are redrawn each trial from a recorded seed (the official harness sets none)."""
    axes = definition.axis_values(workload.axes)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + trial)
    out = []
    for name, tspec in definition.inputs.items():
        spec = workload.inputs[name]
        if spec.type == "scalar":
            out.append(spec.value)
        elif spec.type == "safetensors":
            out.append(blobs.tensors[name].to(device, copy=True))
        else:
            shape = definition.shape_of(tspec, axes)
            t = random_tensor(shape or [], torch_dtype(tspec.dtype), device, gen)
            out.append(t if shape is not None else t.item())
    return out


def check_constraints(definition, workload, inputs, where):
    """Evaluate the definition's constraints over the axes and the materialised inputs."""
    scope = dict(definition.axis_values(workload.axes))
    scope.update(zip(definition.inputs, inputs))
    for c in definition.constraints:
        try:
            ok = eval(c, {"__builtins__": {}}, scope)  # expressions come from the definition file
        except Exception as exc:
            raise DataError(where, f"workload {workload.uuid}: constraint {c!r} cannot be evaluated: {exc}") from None
        if not ok:
            raise DataError(where, f"workload {workload.uuid}: constraint {c!r} is violated",
                            "fix the workload axes or the blob it points to")


def allocate_outputs(definition, workload, device):
    """DPS outputs: torch.empty in the definition dtype, shapes from the axes."""
    axes = definition.axis_values(workload.axes)
    return [torch.empty(definition.shape_of(s, axes) or [], dtype=torch_dtype(s.dtype), device=device)
            for s in definition.outputs.values()]
