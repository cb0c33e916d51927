"""The builders as the official ones. Native (as FIB's TVM-FFI builder): no custom compile flags, CUDA linked for a
"cuda" target in any case, the CUDA library folder found in FIB's order, and a library whose symbols do not all
resolve at load is a COMPILE_ERROR (BuildError), not a failure at the first call; tvm_ffi's compiler is replaced by
a recorder, the library is built here with the C compiler. Python/Triton (as FIB's PythonBuilder): the sources are
written as they are, a namespace package (no __init__.py added), imported from the build folder."""
import os
import shutil
import subprocess
import sys

import pytest

from harness.build import builders
from harness.data.solution import Solution


PATH = os.environ.get("PATH", "")   # as at import: some tests below replace PATH
CC = shutil.which("cc")


@pytest.fixture
def tvm_ffi_cpp():
    return pytest.importorskip("tvm_ffi.cpp")


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
    subprocess.run([CC, "-shared", "-fPIC", str(src), "-o", str(library)], check=True,
                   env={**os.environ, "PATH": PATH})   # the real PATH: the compiler needs its assembler
    return library


def _recording_build(library, calls):
    """Stands in for tvm_ffi.cpp.build: records its arguments, returns `library`."""
    def build(**kwargs):
        calls.append(kwargs)
        return str(library)
    return build


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_unresolved_symbols_are_a_build_error_and_no_custom_flags_are_passed(tmp_path, monkeypatch, tvm_ffi_cpp):
    library = _library(tmp_path, "extern int not_defined_anywhere(void);\n"
                                 "int run(void) { return not_defined_anywhere(); }\n")
    calls = []
    monkeypatch.setattr(tvm_ffi_cpp, "build", _recording_build(library, calls))
    with pytest.raises(builders.BuildError, match="unresolved symbols.*not_defined_anywhere"):
        builders.build(_cpp_solution("CUDA"), cache_root=tmp_path / "cache")
    (kwargs,) = calls
    assert "extra_cuda_cflags" not in kwargs                  # no custom compile flags, as officially
    assert "-lcuda" in kwargs["extra_ldflags"]                 # "CUDA" counts as a cuda target, as officially


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_a_cpu_target_links_no_cuda(tmp_path, monkeypatch, tvm_ffi_cpp):
    calls = []
    library = _library(tmp_path, "int run(void) { return 0; }\n")
    monkeypatch.setattr(tvm_ffi_cpp, "build", _recording_build(library, calls))
    with pytest.raises(builders.BuildError):     # a plain C library is no TVM-FFI module: refused at load
        builders.build(_cpp_solution("cpu"), cache_root=tmp_path / "cache")
    assert calls[0]["extra_ldflags"] == []


# The CUDA library folder, as FIB's TVMFFIBuilder._find_cuda_lib_path finds it: the toolkit of the nvcc on PATH
# first, then /usr/local/cuda, /usr/local/cuda-12, /usr/local/cuda-13 in that order; in each, the first of
# targets/x86_64-linux/lib, lib64, lib holding libcudart.so; CUDA_HOME and CUDA_PATH are not read. Fake toolkits
# under tmp_path; the fixed prefixes are pointed at tmp_path too.
TARGETS, LIB64, LIB = "targets/x86_64-linux/lib", "lib64", "lib"


def _toolkit(home, *libdirs):
    """A fake toolkit: bin/nvcc (executable) and an empty libcudart.so in each of `libdirs`."""
    (home / "bin").mkdir(parents=True, exist_ok=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    for sub in libdirs:
        (home / sub).mkdir(parents=True, exist_ok=True)
        (home / sub / "libcudart.so").write_text("")
    return home


@pytest.fixture
def fake_cuda(tmp_path, monkeypatch):
    """(tmp_path, put_nvcc_on_path): PATH holds only a folder with at most a symlinked nvcc, CUDA_HOME and CUDA_PATH
    name a decoy toolkit (lib64), and the fixed prefixes are tmp_path/usr_local/cuda, cuda-12, cuda-13."""
    on_path = tmp_path / "path"
    on_path.mkdir()
    monkeypatch.setenv("PATH", str(on_path))
    decoy = _toolkit(tmp_path / "decoy", LIB64, LIB, TARGETS)
    monkeypatch.setenv("CUDA_HOME", str(decoy))
    monkeypatch.setenv("CUDA_PATH", str(decoy))
    prefixes = [tmp_path / "usr_local" / name for name in ("cuda", "cuda-12", "cuda-13")]
    monkeypatch.setattr(builders, "CUDA_PREFIXES", tuple(str(p) for p in prefixes))

    def put_nvcc_on_path(home):
        (on_path / "nvcc").symlink_to(home / "bin" / "nvcc")  # resolved to its toolkit, as officially
    return tmp_path, put_nvcc_on_path


def test_the_fixed_prefixes_and_subfolders_are_fibs():
    assert builders.CUDA_PREFIXES == ("/usr/local/cuda", "/usr/local/cuda-12", "/usr/local/cuda-13")
    assert builders.CUDA_LIB_SUBDIRS == ("targets/x86_64-linux/lib", "lib64", "lib")


def test_targets_comes_before_lib64_in_nvccs_toolkit(fake_cuda):
    tmp, put_nvcc_on_path = fake_cuda
    put_nvcc_on_path(_toolkit(tmp / "toolkit", LIB64, TARGETS, LIB))
    assert builders.cuda_lib_dir() == str(tmp / "toolkit" / TARGETS)   # the old order took lib64


def test_nvccs_toolkit_comes_before_cuda_home_and_the_prefixes(fake_cuda):
    tmp, put_nvcc_on_path = fake_cuda
    put_nvcc_on_path(_toolkit(tmp / "toolkit", LIB))
    _toolkit(tmp / "usr_local" / "cuda", TARGETS)
    assert builders.cuda_lib_dir() == str(tmp / "toolkit" / LIB)       # the old order took CUDA_HOME's lib64


def test_the_prefixes_in_fibs_order_not_newest_first(fake_cuda):
    tmp, put_nvcc_on_path = fake_cuda
    put_nvcc_on_path(_toolkit(tmp / "toolkit"))                        # nvcc's toolkit has no libcudart.so
    _toolkit(tmp / "usr_local" / "cuda")                               # nor /usr/local/cuda
    _toolkit(tmp / "usr_local" / "cuda-12", LIB)
    _toolkit(tmp / "usr_local" / "cuda-13", TARGETS)
    assert builders.cuda_lib_dir() == str(tmp / "usr_local" / "cuda-12" / LIB)  # the old order took cuda-13's


def test_no_nvcc_and_no_prefix_finds_nothing_even_with_cuda_home(fake_cuda):
    assert builders.cuda_lib_dir() is None


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_the_found_folder_goes_first_in_the_link_flags(tmp_path, monkeypatch, fake_cuda, tvm_ffi_cpp):
    tmp, put_nvcc_on_path = fake_cuda
    put_nvcc_on_path(_toolkit(tmp / "toolkit", LIB64, TARGETS))
    calls = []
    monkeypatch.setattr(tvm_ffi_cpp, "build", _recording_build(_library(tmp_path, "int run(void) { return 0; }\n"),
                                                               calls))
    with pytest.raises(builders.BuildError):     # a plain C library is no TVM-FFI module: refused at load
        builders.build(_cpp_solution("cuda"), cache_root=tmp_path / "cache")
    assert calls[0]["extra_ldflags"] == [f"-L{tmp / 'toolkit' / TARGETS}", "-lcuda", "-lcublas"]


# Python/Triton: FIB writes only the solution's files under <cache>/<python|triton>/<pkg>/<pkg>/ and imports
# <pkg>.<entry module> with <cache>/<python|triton>/<pkg> on sys.path: a namespace package.

def _py_solution(name, sources, language="python", entry="main.py::run"):
    return Solution.from_json({
        "name": name, "definition": "toy_axpy", "author": "t",
        "spec": {"language": language, "target_hardware": ["cpu"], "entry_point": entry, "dependencies": [],
                 "destination_passing_style": False, "binding": None},
        "sources": [{"path": p, "content": c} for p, c in sources.items()]}, "test")


def test_python_build_adds_no_init_files_and_imports_as_a_namespace_package(tmp_path, clean_imports):
    sol = _py_solution("ns", {
        "main.py": "from .helpers.scale import twice\n\ndef run(x):\n    return twice(x)\n",
        "helpers/scale.py": "from ..consts import TWO\n\ndef twice(x):\n    return TWO * x  # ns test\n",
        "consts.py": "TWO = 2\n"})
    fn = builders.build(sol, cache_root=tmp_path / "cache")
    assert fn(21) == 42                                   # relative imports, down and up, as in our submissions
    pkg = builders.package_name(sol)
    root = tmp_path / "cache" / "builds" / "python" / pkg
    written = sorted(str(p.relative_to(root / pkg)) for p in (root / pkg).rglob("*.py"))
    assert written == ["consts.py", "helpers/scale.py", "main.py"]  # only the solution's files
    assert sys.modules[pkg].__file__ is None                 # a namespace package, as FIB's
    assert str(root) in sys.path


def test_a_module_beside_a_folder_of_the_same_name_wins_as_under_fib(tmp_path, clean_imports):
    # In a namespace package foo.py is imported before a folder foo/ without __init__.py; an __init__.py added in
    # foo/ would make the (empty) folder package win and the import below fail.
    sol = _py_solution("shadow", {
        "main.py": "from .foo import VALUE\n\ndef run(x):\n    return VALUE\n",
        "foo.py": "VALUE = 'module foo.py'  # shadow test\n",
        "foo/bar.py": "VALUE = 'folder foo/'\n"}, language="triton")
    assert builders.build(sol, cache_root=tmp_path / "cache")(None) == "module foo.py"
    assert (tmp_path / "cache" / "builds" / "triton" / builders.package_name(sol)).is_dir()


def test_a_shipped_init_file_is_kept_and_runs(tmp_path, clean_imports):
    sol = _py_solution("own_init", {
        "__init__.py": "MARK = 'ran'  # own init test\n",
        "main.py": "from . import MARK\n\ndef run(x):\n    return MARK\n"})
    assert builders.build(sol, cache_root=tmp_path / "cache")(None) == "ran"
    assert sys.modules[builders.package_name(sol)].__file__.endswith("__init__.py")
