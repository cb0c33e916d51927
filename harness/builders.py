"""Build a solution into a callable, as the official builders do, cached by content hash."""
import importlib
import inspect
import os
import shutil
import sys
import tempfile
from pathlib import Path

CACHE_ROOT = Path(os.environ.get("GDN_HARNESS_CACHE", Path(__file__).resolve().parent.parent / ".cache"))
CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")
CUDA_SUFFIXES = (".cu",)


class BuildError(Exception):
    """The solution did not build; the harness reports COMPILE_ERROR with this message."""


def _write_sources(solution, dest):
    """Materialise sources once per content hash; a half-written tree is never visible."""
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
    if solution.spec.language in ("python", "triton"):
        for folder in [tmp, *[p for p in tmp.rglob("*") if p.is_dir()]]:
            (folder / "__init__.py").touch(exist_ok=True)
    try:
        tmp.rename(dest)
    except OSError:  # built concurrently by another process
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def package_name(solution):
    return f"fib_sol_{solution.content_hash()[:16]}"


def build(solution, cache_root=CACHE_ROOT):
    """Return the solution's entry-point callable. Raises BuildError on any build/import failure."""
    lang = solution.spec.language
    pkg = package_name(solution)
    root = Path(cache_root) / "builds" / pkg
    try:
        if lang in ("python", "triton"):
            return _build_python(solution, root, pkg)
        if lang in ("cuda", "cpp"):
            return _build_native(solution, root, pkg)
    except BuildError:
        raise
    except Exception as exc:
        import traceback
        raise BuildError(f"Build failed for {solution.name}: {type(exc).__name__}: {exc}\n"
                         + traceback.format_exc()) from None
    raise BuildError(f"language {lang!r} is not supported by this harness")


def _build_python(solution, root, pkg):
    pkg_dir = _write_sources(solution, root / pkg)
    for path in (str(root), str(pkg_dir)):  # package imports and flat sibling imports both work
        if path not in sys.path:
            sys.path.insert(0, path)
    entry = solution.spec.entry_file
    if not entry.endswith(".py"):
        raise BuildError(f"entry point file {entry!r} of a {solution.spec.language} solution must be a .py file")
    module = importlib.import_module(f"{pkg}." + entry[:-3].replace("/", "."))
    fn = getattr(module, solution.spec.entry_symbol, None)
    if fn is None or not callable(fn):
        raise BuildError(f"entry point symbol {solution.spec.entry_symbol!r} not found in {entry}")
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
        module = load(name=pkg, sources=cpp + cu, extra_ldflags=["-lcuda", "-lcublas"],
                      build_directory=str(build_dir), verbose=False)
        return getattr(module, symbol)
    import tvm_ffi
    import tvm_ffi.cpp
    lib = tvm_ffi.cpp.build(name=pkg, cpp_files=cpp, cuda_files=cu, extra_ldflags=["-lcuda", "-lcublas"],
                            build_directory=str(build_dir))
    return getattr(tvm_ffi.load_module(lib), symbol)


def check_signature(fn, n_inputs, n_outputs, dps):
    """DPS: exactly n_in + n_out positional parameters; value-returning: n_in. Extra defaulted
    parameters are allowed. Returns an error message, or None when the callable fits."""
    expected = n_inputs + n_outputs if dps else n_inputs
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # native functions carry no Python signature; the call itself will tell
    params = list(sig.parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return (f"Entry point has variadic *args; the {'DPS' if dps else 'value-returning'} style needs "
                f"exactly {expected} positional parameters")
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) <= expected <= len(positional):
        return None
    style = (f"destination-passing style: {n_inputs} inputs + {n_outputs} outputs" if dps
             else f"value-returning style: {n_inputs} inputs")
    return (f"Signature mismatch: entry point takes {len(required)} required positional parameters "
            f"({len(positional)} in all) but the {style} needs {expected}")
