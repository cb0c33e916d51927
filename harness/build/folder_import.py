"""A solution's source folder imported in place, as the official builder imports a written copy of it: the folder a
package, its files modules of it (siblings import each other relatively). For our own submission's tools (tune,
tests), which must see the folder itself (tune writes tuned_tables.json into it)."""
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path


def import_from_folder(folder, entry, name):
    """Module `entry` of the package `name` made of `folder` (kept in sys.modules once per process, as an import
    keeps it)."""
    if name not in sys.modules:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(Path(folder).resolve())]
        sys.modules[name] = importlib.util.module_from_spec(spec)
    return importlib.import_module(f"{name}.{entry}")
