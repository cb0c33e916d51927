"""Build a solution into a callable, as the official builders do, cached by content hash."""
import ctypes
import importlib
import inspect
import os
import shutil
import sys
import tempfile
from pathlib import Path

from harness import REPO

CACHE_ROOT = Path(os.environ.get("GDN_HARNESS_CACHE", REPO / ".cache"))
CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")
CUDA_SUFFIXES = (".cu",)


class BuildError(Exception):
    """The solution did not build; the harness reports COMPILE_ERROR with this message."""


def _write_sources(solution, dest):
    """Materialise sources once per content hash; a half-written tree is never visible. Only the solution's own
    files are written (as FIB's write_sources_to_path): a python/triton build is a namespace package unless the
    solution ships an __init__.py."""
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    for src in solution.sources:
        target = (tmp / src.path).resolve()
        if tmp.resolve() not in target.parents:  # paths are validated on load; belt and braces
            raise BuildError(f"source path {src.path!r} escapes the build folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(src.content, encoding="utf-8")
    try:
        tmp.rename(dest)
    except OSError:  # built concurrently by another process
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def package_name(solution):
    return f"fib_sol_{solution.content_hash()[:12]}"


def build(solution, cache_root=CACHE_ROOT):
    """Return the solution's entry-point callable. Raises BuildError on any build/import failure."""
    lang = solution.spec.language
    pkg = package_name(solution)
    try:
        if lang in ("python", "triton"):
            # one subfolder per builder, as FIB's python/ and triton/; also keeps clear of the folders that
            # earlier versions wrote to builds/<pkg> with an __init__.py added in every folder
            return _build_python(solution, Path(cache_root) / "builds" / lang / pkg, pkg)
        if lang in ("cuda", "cpp"):
            return _build_native(solution, Path(cache_root) / "builds" / pkg, pkg)
    except BuildError:
        raise
    except Exception as exc:
        raise BuildError(f"{type(exc).__name__}: {exc}") from exc
    raise BuildError(f"No registered builder can build solution '{solution.name}'")


def _build_python(solution, root, pkg):
    _write_sources(solution, root / pkg)
    # As officially, only the build folder goes on sys.path: siblings import as `from .x import y`.
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    entry = solution.spec.entry_file
    if not entry.endswith(".py"):
        raise BuildError(f"Entry file '{entry}' is not a Python file")
    module_name = ".".join([pkg, *Path(entry).with_suffix("").parts])
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise BuildError(f"Failed importing module '{module_name}' from sources: {exc}") from exc
    symbol = solution.spec.entry_symbol
    if not hasattr(module, symbol):
        raise BuildError(f"Entry symbol '{symbol}' not found in module '{module_name}'")
    fn = getattr(module, symbol)
    if not callable(fn):
        raise BuildError(f"Entry symbol '{symbol}' is not callable")
    return fn


def _build_native(solution, root, pkg):
    src_dir = _write_sources(solution, root / "src")
    files = [src_dir / s.path for s in solution.sources]
    cpp = [str(f) for f in files if f.suffix in CPP_SUFFIXES]
    cu = [str(f) for f in files if f.suffix in CUDA_SUFFIXES]
    build_dir = root / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    symbol = solution.spec.entry_symbol
    if solution.spec.binding == "torch":
        from torch.utils.cpp_extension import load
        try:
            module = load(name=pkg, sources=cpp + cu, extra_include_paths=[str(src_dir)], extra_ldflags=[],
                          with_cuda=solution.spec.language == "cuda", build_directory=str(build_dir), verbose=True)
        except Exception as exc:
            raise BuildError(f"Torch build failed for solution '{solution.name}': {exc}") from exc
        if not hasattr(module, symbol):
            raise BuildError(f"Exported symbol '{symbol}' not found in built extension")
        return getattr(module, symbol)
    import tvm_ffi
    import tvm_ffi.cpp
    # as the official builder: CUDA is linked for .cu sources or a "cuda" target in any case, and no custom flags
    cuda_target = any(t.lower() == "cuda" for t in solution.spec.target_hardware)
    ldflags = ["-lcuda", "-lcublas"] if cu or cuda_target else []
    if ldflags and (libdir := cuda_lib_dir()):   # looked up only when CUDA is linked, as officially
        ldflags.insert(0, f"-L{libdir}")
    try:
        lib = tvm_ffi.cpp.build(name=pkg, cpp_files=cpp, cuda_files=cu, extra_include_paths=[str(src_dir)],
                                extra_ldflags=ldflags, build_directory=str(build_dir))
    except Exception as exc:
        raise BuildError(f"TVM-FFI compilation failed for '{solution.name}': {exc}") from exc
    try:    # as officially: every symbol must resolve now, not at the first call
        ctypes.CDLL(str(lib), mode=os.RTLD_NOW)
    except OSError as exc:
        raise BuildError(f"Shared library has unresolved symbols: {exc}") from exc
    try:
        module = tvm_ffi.load_module(lib)
    except Exception as exc:
        raise BuildError(f"Failed to load compiled module: {exc}") from exc
    if not hasattr(module, symbol):
        raise BuildError(f"Entry point '{symbol}' not found in module")
    return getattr(module, symbol)


# Where FIB's tvm-ffi builder (TVMFFIBuilder._find_cuda_lib_path) looks for the folder holding libcudart.so, in
# its order: beside the nvcc on PATH first, then these fixed prefixes; CUDA_HOME and CUDA_PATH are not read.
CUDA_LIB_SUBDIRS = ("targets/x86_64-linux/lib", "lib64", "lib")
CUDA_PREFIXES = ("/usr/local/cuda", "/usr/local/cuda-12", "/usr/local/cuda-13")


def cuda_lib_dir():
    """The CUDA toolkit's library folder passed as -L when CUDA is linked, found as the official builder finds it:
    the toolkit of the nvcc on PATH (symlinks resolved), then /usr/local/cuda, cuda-12, cuda-13; in each, the
    first of targets/x86_64-linux/lib, lib64, lib that holds libcudart.so. None when none does."""
    homes = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.append(Path(nvcc).resolve().parent.parent)
    homes += [Path(p) for p in CUDA_PREFIXES]
    for home in homes:
        for sub in CUDA_LIB_SUBDIRS:
            if (home / sub / "libcudart.so").exists():
                return str(home / sub)
    return None


def check_signature(fn, n_inputs, n_outputs, dps):
    """The official check (FIB compile/builder.py _try_validate_signature): the callable must bind n_in + n_out
    (DPS) or n_in positional arguments, extra defaulted parameters are fine; a value-returning callable's return
    annotation must fit n_out. Returns the official message, or None when it fits."""
    expected = n_inputs + n_outputs if dps else n_inputs
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # native functions carry no Python signature: the official check is skipped too
    try:
        sig.bind(*[object()] * expected)
    except TypeError as exc:
        style = "Destination-passing" if dps else "Value-returning"
        return (f"{style} style callable: expected {expected} positional parameters, "
                f"but signature '{sig}' is incompatible: {exc}")
    return None if dps else return_annotation_problem(sig.return_annotation, n_outputs)


def return_annotation_problem(annotation, n_outputs):
    """FIB's rule on a value-returning callable's return annotation, with its messages: a tuple[...] must have
    n_outputs elements, None means no outputs, anything else (a string too) one output."""
    if annotation is inspect.Signature.empty:
        return None
    if getattr(annotation, "__origin__", None) is tuple:
        args = getattr(annotation, "__args__", None)
        if args is not None and len(args) != n_outputs:
            return (f"Value-returning style callable with {n_outputs} outputs must return a {n_outputs}-element "
                    f"tuple, got {annotation}")
    elif annotation is None:
        if n_outputs != 0:
            return f"Value-returning style callable with {n_outputs} outputs must not return None"
    elif n_outputs != 1:
        return f"Value-returning style callable returning non-tuple must only have one output, got {n_outputs}"
    return None
