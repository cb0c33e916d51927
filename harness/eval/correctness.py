"""The official correctness rule, as pure functions (EVALUATOR.md 'Correctness')."""
import math
from dataclasses import dataclass

import torch

from harness.data.trace import Status

DEFAULT_ATOL = 1e-2
DEFAULT_RTOL = 1e-2
DEFAULT_MATCHED_RATIO = 1.0


@dataclass(frozen=True)
class Tolerance:
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    required_matched_ratio: float = DEFAULT_MATCHED_RATIO


@dataclass
class OutputCheck:
    status: Status | None           # None: this output passes
    max_abs: float
    max_rel: float
    matched_ratio: float
    message: str = ""
    stops: bool = False             # shape/dtype/inf/NaN: the official check returns at once


def check_output(name, out, ref, tol=Tolerance()):
    """Shape, then exact dtype, then inf, then NaN, then the element rule: an element fails only if
    abs > atol AND rel > rtol; the tensor fails if the passing fraction is below the required ratio."""
    if tuple(out.shape) != tuple(ref.shape):
        return OutputCheck(Status.INCORRECT_SHAPE, math.nan, math.nan, 0.0,
                           f"output '{name}' shape {tuple(out.shape)} != expected {tuple(ref.shape)}", True)
    if out.dtype != ref.dtype:
        return OutputCheck(Status.INCORRECT_DTYPE, math.nan, math.nan, 0.0,
                           f"output '{name}' dtype {out.dtype} != expected {ref.dtype}", True)
    x, y = out.detach().float(), ref.detach().to(out.device).float()
    if torch.isinf(x).any():
        return OutputCheck(Status.INCORRECT_NUMERICAL, math.inf, math.inf, 0.0, f"output '{name}' contains inf", True)
    if torch.isnan(x).any():
        # the DPS outputs are NaN-filled before the call (differences: "DPS outputs are filled with NaN")
        return OutputCheck(Status.INCORRECT_NUMERICAL, math.nan, math.nan, 0.0, f"output '{name}' contains NaN "
                           "(outputs are filled with NaN before each call, so one never written fails here too)", True)
    abs_err = (x - y).abs()
    rel_err = abs_err / (y.abs() + 1e-8)
    failed = (abs_err > tol.atol) & (rel_err > tol.rtol)
    n = x.numel()
    matched = min(1.0, max(0.0, 1.0 - failed.sum().item() / n)) if n else 1.0
    max_abs = abs_err.max().item() if n else 0.0
    max_rel = rel_err.max().item() if n else 0.0
    if matched < tol.required_matched_ratio:
        return OutputCheck(Status.INCORRECT_NUMERICAL, max_abs, max_rel, matched,
                           f"output '{name}': {failed.sum().item()} of {n} elements exceed atol={tol.atol} and "
                           f"rtol={tol.rtol} (matched ratio {matched:.6f} < {tol.required_matched_ratio})")
    return OutputCheck(None, max_abs, max_rel, matched)


def merge_max(acc, value):
    """The running max error as officially (FIB's evaluator: Python's max from 0.0): a NaN error, which only a
    reference holding NaN gives, never enters it; inf does."""
    return max(acc, value)


def normalize_outputs(result, output_names, dtypes=None, device=None):
    """A value-returning result as a list of tensors in output order, by the official rule (FIB
    evaluators/utils.py normalize_result): a tuple/list with one value per output, or a single value when there
    is one output; a value that is not a tensor goes through torch.tensor. Anything else raises, so the official
    status is RUNTIME_ERROR."""
    n = len(output_names)
    if isinstance(result, dict):  # FIB would call torch.tensor(dict), or count it as one value: it fails
        raise RuntimeError(f"returned a dict (keys {list(result)}); the official evaluator accepts a tensor or a "
                           f"tuple/list of the {n} outputs {list(output_names)} in order, so it is a RUNTIME_ERROR")
    if isinstance(result, (tuple, list)):
        if len(result) != n:
            raise RuntimeError(f"Tuple/list has {len(result)} elements but {n} outputs expected")
        values = list(result)
    elif n != 1:
        raise RuntimeError(f"Single value returned but {n} outputs expected")
    else:
        values = [result]
    return [to_tensor(v, name, dtypes[i] if dtypes else None, device)
            for i, (name, v) in enumerate(zip(output_names, values))]


def to_tensor(value, name, dtype, device):
    if isinstance(value, torch.Tensor):
        return value.to(device) if device is not None else value
    if value is None:  # torch.tensor(None) raises in FIB: said plainly here
        raise RuntimeError(f"output '{name}' is None; the official evaluator makes each returned value a tensor "
                           "(torch.tensor), which fails on None, so it is a RUNTIME_ERROR")
    return torch.tensor(value, dtype=dtype, device=device)
