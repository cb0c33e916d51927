"""The native builder as the official TVM-FFI builder: no custom compile flags, CUDA linked for a "cuda" target in
any case, and a library whose symbols do not all resolve at load is a COMPILE_ERROR (BuildError), not a failure
at the first call. tvm_ffi's compiler is replaced by a recorder; the library is built here with the C compiler."""
import shutil
import subprocess

import pytest

from harness.build import builders
from harness.data.solution import Solution

tvm_ffi_cpp = pytest.importorskip("tvm_ffi.cpp")


def _cpp_solution(target):
    return Solution.from_json({
        "name": "native", "definition": "toy_axpy", "author": "t",
        "spec": {"language": "cpp", "target_hardware": [target], "entry_point": "k.cpp::run", "dependencies": [],
                 "destination_passing_style": True, "binding": None},
        "sources": [{"path": "k.cpp", "content": "// made by the test\n"}]}, "test")


def _library(tmp_path, c_source):
    """A shared library compiled here from `c_source`."""
    src, library = tmp_path / "lib.c", tmp_path / "lib.so"
    src.write_text(c_source)
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(library)], check=True)
    return library


def _recording_build(library, calls):
    """Stands in for tvm_ffi.cpp.build: records its arguments, returns `library`."""
    def build(**kwargs):
        calls.append(kwargs)
        return str(library)
    return build


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_unresolved_symbols_are_a_build_error_and_no_custom_flags_are_passed(tmp_path, monkeypatch):
    library = _library(tmp_path, "extern int not_defined_anywhere(void);\n"
                                 "int run(void) { return not_defined_anywhere(); }\n")
    calls = []
    monkeypatch.setattr(tvm_ffi_cpp, "build", _recording_build(library, calls))
    with pytest.raises(builders.BuildError, match="unresolved symbols.*not_defined_anywhere"):
        builders.build(_cpp_solution("CUDA"), cache_root=tmp_path / "cache")
    (kwargs,) = calls
    assert "extra_cuda_cflags" not in kwargs                  # no custom compile flags, as officially
    assert "-lcuda" in kwargs["extra_ldflags"]                 # "CUDA" counts as a cuda target, as officially


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_a_cpu_target_links_no_cuda(tmp_path, monkeypatch):
    calls = []
    library = _library(tmp_path, "int run(void) { return 0; }\n")
    monkeypatch.setattr(tvm_ffi_cpp, "build", _recording_build(library, calls))
    with pytest.raises(builders.BuildError):     # a plain C library is no TVM-FFI module: refused at load
        builders.build(_cpp_solution("cpu"), cache_root=tmp_path / "cache")
    assert calls[0]["extra_ldflags"] == []
