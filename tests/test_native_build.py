"""Contest entries in CUDA: on this CPU machine, the tvm-ffi solution compiles and links through
tvm_ffi.cpp.build as the official builder calls it (against the CUDA runtime only: no driver or cuBLAS
here), and the torch-binding solution compiles with nvcc against torch's headers (compile only: a CPU
torch cannot build CUDA extensions). On a GPU both build through the harness's builders and run."""
import os
import shutil
from pathlib import Path

import pytest

from harness.build.builders import cuda_lib_dir

NATIVE = Path(__file__).resolve().parent / "native"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_tvm_ffi_solution_compiles_with_nvcc(tmp_path, monkeypatch):
    tvm_ffi_cpp = pytest.importorskip("tvm_ffi.cpp")
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", os.environ.get("TVM_FFI_CUDA_ARCH_LIST", "9.0"))
    libdir = cuda_lib_dir()
    assert libdir, "nvcc is here but no CUDA runtime library folder was found"
    lib = tvm_ffi_cpp.build(name="axpy_tvm_ffi", cuda_files=[str(NATIVE / "axpy_tvm_ffi.cu")],
                            extra_include_paths=[str(NATIVE)], extra_cuda_cflags=["-lineinfo"],
                            extra_ldflags=[f"-L{libdir}"], build_directory=str(tmp_path))
    assert Path(lib).exists() and Path(lib).stat().st_size > 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_torch_binding_solution_compiles_with_nvcc(tmp_path):
    import sysconfig

    import torch.utils.cpp_extension as ext
    # A CPU torch wheel lacks one generated CUDA header; an empty stand-in lets the real headers compile.
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    stub.parent.mkdir(parents=True)
    stub.write_text("#pragma once\n")
    includes = [str(tmp_path / "stub"), *ext.include_paths(), sysconfig.get_paths()["include"]]
    cmd = ["nvcc", "-c", "-std=c++17", "-arch=sm_90", *[f"-I{p}" for p in includes],
           "-DTORCH_EXTENSION_NAME=axpy_torch", "-DTORCH_API_INCLUDE_EXTENSION_H", str(NATIVE / "axpy_torch.cu"),
           "-o", str(tmp_path / "axpy_torch.o")]
    import subprocess
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "axpy_torch.o").stat().st_size > 0


def _native_solution(path, binding):
    return {"name": f"axpy-{binding}", "definition": "toy_axpy", "author": "native", "description": None,
            "spec": {"language": "cuda", "target_hardware": ["cuda"], "entry_point": f"{path.name}::run",
                     "dependencies": [], "destination_passing_style": True, "binding": binding},
            "sources": [{"path": path.name, "content": path.read_text()}]}


@pytest.mark.gpu
@pytest.mark.parametrize("binding,source", [("tvm-ffi", "axpy_tvm_ffi.cu"), ("torch", "axpy_torch.cu")])
def test_native_solutions_build_and_pass_on_gpu(tmp_path, binding, source):
    from harness.data.dataset import Dataset
    from harness.eval.options import EvalOptions
    from harness.eval.loop import evaluate
    from harness.eval.child import TimingConfig
    from harness.data.solution import Solution
    from tests.toy import make_toy_root

    ds = Dataset(make_toy_root(tmp_path / "toy"))
    d = ds.definition("toy_axpy")
    sol = Solution.from_json(_native_solution(NATIVE / source, binding), source)
    opts = EvalOptions(device="cuda", out_dir=tmp_path / "o", timing=TimingConfig(1, 5, 1), show_progress=False,
                       timeout=600)
    (r, *_) = evaluate(ds, d, ds.workloads(d)[:1], [sol], opts)
    assert r.trace.evaluation.status.value == "PASSED", r.trace.evaluation.log[-3000:]
