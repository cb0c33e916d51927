"""The official element rule on hand-built cases."""
import math

import pytest
import torch

from harness.eval.correctness import Tolerance, check_output, merge_max, normalize_outputs
from harness.data.trace import Status


def t(*xs, dtype=torch.float32):
    return torch.tensor(xs, dtype=dtype)


def test_element_fails_only_when_both_abs_and_rel_exceed():
    ref = t(100.0, 0.001, 1.0)
    # abs 0.5 > atol but rel 0.005 <= rtol: passes. abs 0.009 <= atol, rel 9 > rtol: passes.
    assert check_output("o", t(100.5, 0.01, 1.0), ref).status is None
    # abs 0.02 > atol and rel 0.02 > rtol: fails.
    res = check_output("o", t(100.0, 0.001, 1.02), ref)
    assert res.status == Status.INCORRECT_NUMERICAL
    assert res.max_abs == pytest.approx(0.02, rel=1e-4) and res.max_rel == pytest.approx(0.02, rel=1e-3)
    assert res.matched_ratio == pytest.approx(2 / 3)


def test_boundary_is_not_a_failure():
    # exactly at the tolerance: abs > atol is false
    ref = t(0.0)
    assert check_output("o", t(0.0), ref).status is None
    assert check_output("o", t(0.0078125), ref, Tolerance(atol=0.0078125, rtol=0.0)).status is None


def test_not_allclose():
    # torch.allclose (abs <= atol + rtol*|y|) would reject this; the official rule accepts (rel small)
    ref = t(1000.0)
    out = t(1005.0)
    assert not torch.allclose(out, ref, atol=1e-2, rtol=1e-3)
    assert check_output("o", out, ref, Tolerance(1e-2, 1e-2)).status is None


def test_matched_ratio():
    ref = torch.zeros(10)
    out = torch.zeros(10)
    out[0] = 1.0
    assert check_output("o", out, ref).status == Status.INCORRECT_NUMERICAL
    assert check_output("o", out, ref, Tolerance(required_matched_ratio=0.9)).status is None
    assert check_output("o", out, ref, Tolerance(required_matched_ratio=0.95)).status == Status.INCORRECT_NUMERICAL


def test_order_shape_dtype_inf_nan():
    ref = torch.zeros(2, 2)
    assert check_output("o", torch.zeros(4), ref).status == Status.INCORRECT_SHAPE
    assert check_output("o", torch.zeros(2, 2, dtype=torch.float64), ref).status == Status.INCORRECT_DTYPE
    both = t(float("nan"), float("inf")).reshape(1, 2).expand(2, 2)
    r = check_output("o", both, ref)
    assert r.status == Status.INCORRECT_NUMERICAL and math.isinf(r.max_abs)  # inf is checked before NaN
    r = check_output("o", torch.full((2, 2), float("nan")), ref)
    assert r.status == Status.INCORRECT_NUMERICAL and math.isnan(r.max_abs)
    assert "so one never written fails here too" in r.message   # the likely cause, said where it shows


def test_errors_computed_in_fp32_for_bf16():
    ref = t(1.0, dtype=torch.bfloat16)
    out = t(1.0078125, dtype=torch.bfloat16)  # one bf16 ulp above 1
    r = check_output("o", out, ref)
    assert r.max_abs == pytest.approx(0.0078125) and r.status is None


def test_empty_tensor_passes():
    assert check_output("o", torch.zeros(0), torch.zeros(0)).status is None


def test_max_errors_accumulate_as_officially():
    # from 0.0 over the outputs and trials: a NaN error (a reference holding NaN) is dropped, inf is kept
    acc = 0.0
    for value in (math.nan, 1.0, math.nan, 0.5):
        acc = merge_max(acc, value)
    assert acc == 1.0
    assert merge_max(1.0, math.inf) == math.inf and merge_max(1.0, 2.0) == 2.0


def test_normalize_outputs():
    a, b = torch.zeros(1), torch.ones(1)
    assert normalize_outputs(a, ["o"])[0] is a
    with pytest.raises(RuntimeError, match="returned a dict"):  # the official evaluator takes no dict
        normalize_outputs({"o2": b, "o1": a}, ["o1", "o2"])
    with pytest.raises(RuntimeError, match="Single value returned but 2 outputs expected"):
        normalize_outputs(a, ["o1", "o2"])
    with pytest.raises(RuntimeError, match="Tuple/list has 1 elements but 2 outputs expected"):
        normalize_outputs((a,), ["o1", "o2"])
    with pytest.raises(TypeError, match="invalid data type 'str'"):  # torch.tensor("x"), as officially
        normalize_outputs("x", ["o"])
    assert normalize_outputs(3.0, ["o"], [torch.float32])[0].dtype == torch.float32


def test_change_detection_treats_nan_as_unchanged():
    from harness.eval.child import _changed_inputs
    a = torch.tensor([1.0, float("nan")])
    assert _changed_inputs(["x"], [a], [a.clone()]) == []
    assert _changed_inputs(["x"], [a], [torch.tensor([2.0, float("nan")])]) == ["x"]
    assert _changed_inputs(["i"], [torch.tensor([1, 2])], [torch.tensor([1, 3])]) == ["i"]
