"""What can be told about a solution from its sources alone, before any child starts: a python/triton entry
point that is not there or cannot take the call, modules it imports that this machine lacks, and a native solution
that needs a CUDA GPU where the run has none. Each makes the build fail (COMPILE_ERROR), so the harness reports it
for every pair at once instead of starting a child per pair to find the same thing."""
import ast

from harness.build.builders import CUDA_SUFFIXES
from harness.build.imports import PIP_NAMES, missing_modules
from harness.build.package import missing_entry, module_bindings, validate
from harness.data.jsonio import DataError


def needs_cuda(solution):
    """Why this solution cannot be built without a CUDA GPU, or None: a cuda solution (compiled for the GPU's
    architecture, which nvcc and TVM-FFI read off the GPU), or a cpp one with CUDA sources."""
    language = solution.spec.language
    if language == "cuda":
        return "a cuda solution"
    cu = [s.path for s in solution.sources if s.path.endswith(CUDA_SUFFIXES)]
    if language == "cpp" and cu:
        return f"a cpp solution with CUDA sources ({', '.join(cu)})"
    return None


def static_problem(solution, definition, device=None):
    """Why the official build of this solution would fail, if its sources already tell; else None. The signature
    is judged only where the source says it (package.entry_def: one def, undecorated or under decorators that keep
    its signature, such as @torch.no_grad()); another decorator, for one, is left to the build-time check on the
    object the build returns, as FIB checks it. With `device` (the run's --device): a native solution that needs
    a CUDA GPU is refused where the device is not one, before its build fails with a compiler's message about
    a GPU architecture."""
    needs = needs_cuda(solution) if device is not None and not str(device).startswith("cuda") else None
    if needs:
        return f"{needs} needs a CUDA GPU: --device {device} cannot build or run it"
    if solution.spec.language not in ("python", "triton"):
        return None     # native sources: the compiler says
    entry = next(s.content for s in solution.sources if s.path == solution.spec.entry_file)
    try:
        bound = module_bindings(ast.parse(entry))
    except SyntaxError as exc:
        return f"{solution.spec.entry_file}:{exc.lineno}: syntax error: {exc.msg}"
    symbol = solution.spec.entry_symbol
    if bound is not None and symbol not in bound:
        return missing_entry(symbol, solution.spec.entry_file, bound)
    try:
        validate(solution, definition, solution.name)
    except DataError as exc:
        return exc.message
    missing = missing_modules(solution)
    if missing:
        named = [f"{m} (pip package {PIP_NAMES[m]})" if m in PIP_NAMES else m for m in missing]
        return (f"imports {', '.join(named)}, which cannot be imported on this machine "
                f"(install {'it' if len(missing) == 1 else 'them'}, or evaluate on a machine that has "
                f"{'it' if len(missing) == 1 else 'them'})"
                + ("; FlashInfer's GDN kernels run on a CUDA GPU only" if "flashinfer" in missing else ""))
    return None
