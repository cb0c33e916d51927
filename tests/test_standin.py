"""Stand-in blobs: deterministic, realistic, flagged, and never written over real data."""
import hashlib
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from harness.data.dataset import Dataset
from harness.eval.inputs import check_constraints, load_blobs, materialize
from harness.data.jsonio import DataError
from tests.toy import make_toy_root

DECODE, PREFILL = "gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"


def _copy_root(tmp_path, name):
    src = Dataset().root
    dst = tmp_path / name
    for sub in ("definitions", "workloads"):
        subprocess.run(["cp", "-r", str(src / sub), str(dst / sub)], check=True) if dst.exists() else (
            dst.mkdir(parents=True), subprocess.run(["cp", "-r", str(src / sub), str(dst / sub)], check=True))
    return Dataset(dst)


def _first(ds, def_name, pred=lambda w: True):
    d = ds.definition(def_name)
    return d, next(w for w in ds.workloads(d) if pred(w))


def test_same_bytes_in_two_roots_and_another_process(tmp_path):
    a, b = _copy_root(tmp_path, "a"), _copy_root(tmp_path, "b")
    d, w = _first(a, PREFILL, lambda w: w.axes["num_seqs"] >= 3 and w.axes["total_seq_len"] < 300)
    fa = load_blobs(a, d, w).files[0]
    _, wb = _first(b, PREFILL, lambda x: x.uuid == w.uuid)
    code = ("import sys; sys.path.insert(0, %r); from harness.data.dataset import Dataset; "
            "from harness.eval.inputs import load_blobs; ds = Dataset(%r); d = ds.definition(%r); "
            "w = [x for x in ds.workloads(d) if x.uuid == %r][0]; load_blobs(ds, d, w)"
            ) % (str(Dataset().root.parent), str(b.root), PREFILL, w.uuid)
    subprocess.run([sys.executable, "-c", code], check=True)
    fb = b.blob_path(w.inputs["q"].path)
    assert hashlib.sha256(fa.read_bytes()).hexdigest() == hashlib.sha256(fb.read_bytes()).hexdigest()


def test_realistic_distributions(tmp_path):
    ds = _copy_root(tmp_path, "r")
    d, w = _first(ds, PREFILL, lambda w: w.axes["num_seqs"] >= 3)
    blobs = load_blobs(ds, d, w)
    assert blobs.standin
    t = blobs.tensors
    assert torch.allclose(t["q"].float().norm(dim=-1), torch.ones(1), atol=1e-2)
    assert torch.allclose(t["k"].float().norm(dim=-1), torch.ones(1), atol=1e-2)
    cu = t["cu_seqlens"]
    assert cu.dtype == torch.int64 and cu[0] == 0 and cu[-1] == w.axes["total_seq_len"]
    assert len(cu) == w.axes["num_seqs"] + 1 and bool((cu[1:] > cu[:-1]).all())
    assert len(set((cu[1:] - cu[:-1]).tolist())) > 1  # varied lengths
    A = t["A_log"].exp()
    assert bool((A >= 1).all() and (A <= 16).all())
    dt = F.softplus(t["dt_bias"])
    assert bool((dt >= 0.99e-3).all() and (dt <= 1.01e-1).all())
    assert 0.5 < t["state"].std().item() < 2.0  # outputs well above atol: see tests/test_mutations.py
    inputs = materialize(d, w, blobs, "cpu", 0, 0)
    check_constraints(d, w, inputs, "test")
    assert inputs[-1] == pytest.approx(0.08838834764831843)  # scale is a plain Python scalar


def test_real_blob_is_used_flagged_and_untouched(tmp_path):
    root = make_toy_root(tmp_path)
    ds = Dataset(root)
    d = ds.definition("toy_axpy")
    real = root / "blob" / "toy" / "real.safetensors"
    before = real.read_bytes()
    w = [x for x in ds.workloads(d) if x.uuid == "w-blob"][0]
    blobs = load_blobs(ds, d, w)
    assert not blobs.standin and torch.equal(blobs.tensors["x"], torch.arange(8.0).reshape(4, 2))
    assert real.read_bytes() == before
    w2 = [x for x in ds.workloads(d) if x.uuid == "w-standin"][0]
    assert load_blobs(ds, d, w2).standin


def test_bad_blobs_are_refused_by_name(tmp_path):
    root = make_toy_root(tmp_path)
    ds = Dataset(root)
    d = ds.definition("toy_axpy")
    w = [x for x in ds.workloads(d) if x.uuid == "w-blob"][0]
    real = root / "blob" / "toy" / "real.safetensors"
    real.write_bytes(real.read_bytes()[:40])  # truncated
    with pytest.raises(DataError, match="real.safetensors: cannot read safetensors file"):
        load_blobs(ds, d, w)
    from safetensors.torch import save_file
    save_file({"x": torch.zeros(3, 2), "y": torch.zeros(4, 2)}, str(real))
    with pytest.raises(DataError,
                       match=r"tensor 'x' \(input 'x'\) is \(3, 2\) torch.float32; the definition wants \(4, 2\)"):
        load_blobs(ds, d, w)
    save_file({"y": torch.zeros(4, 2)}, str(real))
    with pytest.raises(DataError, match="tensor_key 'x' .* not in file"):
        load_blobs(ds, d, w)


def test_constraint_violation_is_refused(tmp_path):
    ds = _copy_root(tmp_path, "c")
    d, w = _first(ds, PREFILL)
    blobs = load_blobs(ds, d, w)
    inputs = materialize(d, w, blobs, "cpu", 0, 0)
    inputs[8] = torch.tensor([0, 5], dtype=torch.int64)  # cu_seqlens[-1] != total_seq_len
    with pytest.raises(DataError, match="constraint 'total_seq_len == cu_seqlens\\[-1\\].item\\(\\)' is violated"):
        check_constraints(d, w, inputs, "test")


def test_random_inputs_follow_the_seed(tmp_path):
    root = make_toy_root(tmp_path)
    ds = Dataset(root)
    d = ds.definition("toy_axpy")
    w = [x for x in ds.workloads(d) if x.uuid == "w-random"][0]
    blobs = load_blobs(ds, d, w)
    a0, a1, b0 = (materialize(d, w, blobs, "cpu", t, s) for t, s in ((0, 7), (1, 7), (0, 7)))
    assert torch.equal(a0[0], b0[0]) and not torch.equal(a0[0], a1[0])  # fixed per trial, new per trial
