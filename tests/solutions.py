"""Our submission's sources as the official builder imports them: solution/<language>/ as a package, the entry file
a module of it (its siblings are imported relatively)."""
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

SUBMISSION = Path(__file__).resolve().parent.parent / "submission"


def solution_dir(definition, language="triton"):
    return SUBMISSION / definition / "solution" / language


def load_solution(definition, entry="kernel", language="triton"):
    """The entry module of submission/<definition>/solution/<language>/, imported as a module of a package made of
    that folder (once per process: the package is kept in sys.modules, as an import keeps it)."""
    name = f"_sub_{definition}_{language}"
    if name not in sys.modules:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(solution_dir(definition, language))]
        sys.modules[name] = importlib.util.module_from_spec(spec)
    return importlib.import_module(f"{name}.{entry}")
