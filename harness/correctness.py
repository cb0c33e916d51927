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


def check_output(name, out, ref, tol=Tolerance()):
    """Shape, then exact dtype, then inf, then NaN, then the element rule: an element fails only if
    abs > atol AND rel > rtol; the tensor fails if the passing fraction is below the required ratio."""
    if not isinstance(out, torch.Tensor):
        return OutputCheck(Status.INCORRECT_SHAPE, math.nan, math.nan, 0.0,
                           f"output '{name}' is {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return OutputCheck(Status.INCORRECT_SHAPE, math.nan, math.nan, 0.0,
                           f"output '{name}' shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return OutputCheck(Status.INCORRECT_DTYPE, math.nan, math.nan, 0.0,
                           f"output '{name}' dtype {out.dtype} != expected {ref.dtype}")
    x, y = out.detach().float(), ref.detach().to(out.device).float()
    if torch.isinf(x).any():
        return OutputCheck(Status.INCORRECT_NUMERICAL, math.inf, math.inf, 0.0, f"output '{name}' contains inf")
    if torch.isnan(x).any():
        return OutputCheck(Status.INCORRECT_NUMERICAL, math.nan, math.nan, 0.0, f"output '{name}' contains NaN")
    abs_err = (x - y).abs()
    rel_err = abs_err / (y.abs() + 1e-8)
    failed = (abs_err > tol.atol) & (rel_err > tol.rtol)
    n = x.numel()
    matched = 1.0 - (failed.sum().item() / n) if n else 1.0
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


def normalize_outputs(result, n_outputs):
    """A value-returning solution's result as a list: a tensor, or a tuple/list of them."""
    if isinstance(result, torch.Tensor):
        result = [result]
    if not isinstance(result, (list, tuple)):
        raise TypeError(f"solution returned {type(result).__name__}; expected a tensor or a tuple of "
                        f"{n_outputs} tensors")
    if len(result) != n_outputs:
        raise TypeError(f"solution returned {len(result)} outputs; the definition has {n_outputs}")
    return list(result)
