"""The official correctness rule, as pure functions (EVALUATOR.md 'Correctness')."""
import math
from dataclasses import dataclass

import torch

from harness.trace import Status

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
    if not isinstance(out, torch.Tensor):
        return OutputCheck(Status.INCORRECT_SHAPE, math.nan, math.nan, 0.0,
                           f"output '{name}' is {type(out).__name__}, not a tensor", True)
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
        return OutputCheck(Status.INCORRECT_NUMERICAL, math.nan, math.nan, 0.0, f"output '{name}' contains NaN", True)
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


def merge_max(a, b):
    """Max that lets NaN and inf win, so a NaN anywhere is reported."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b)


def normalize_outputs(result, output_names, dtypes=None, device=None):
    """A value-returning result as a list in output order, as the official normaliser accepts it:
    a dict by output name, a single tensor (one output only), a scalar, or a tuple/list."""
    n = len(output_names)
    if isinstance(result, dict):
        missing = [k for k in output_names if k not in result]
        if missing:
            raise RuntimeError(f"Returned dict lacks outputs {missing}")
        result = [result[k] for k in output_names]
    elif isinstance(result, torch.Tensor):
        if n != 1:
            raise RuntimeError("Single Tensor returned but multiple outputs are defined")
        result = [result]
    elif isinstance(result, (int, float, bool)):
        result = [result]
    elif isinstance(result, (tuple, list)):
        if len(result) != n:
            raise RuntimeError(f"Tuple/list has {len(result)} elements but {n} outputs expected")
        result = list(result)
    else:
        raise RuntimeError("Unexpected return type; must be Tensor, scalar, or dict[name -> Tensor/scalar]")
    out = []
    for i, r in enumerate(result):
        if isinstance(r, (int, float, bool)) and not isinstance(r, torch.Tensor):
            r = torch.tensor(r, dtype=dtypes[i] if dtypes else None, device=device)
        out.append(r.to(device) if device is not None and isinstance(r, torch.Tensor) else r)
    return out
