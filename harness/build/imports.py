"""The python sources a solution's build imports: its entry file and, transitively, the own sources those import at
module level (a source nothing imports is never run). The build writes the sources into a package and puts only its
parent folder on sys.path, as officially, so an own module imported as a top-level one is not found."""
import ast
import importlib.util

from harness.data.jsonio import DataError


def imported_sources(solution, where=None):
    """[(path, module tree)] of the python sources the build imports, entry file first; DataError (at `where`, the
    solution's folder or name) naming the file and line of the first one that does not parse."""
    sources = {s.path: s.content for s in solution.sources if s.path.endswith(".py")}
    todo, seen, found = [solution.spec.entry_file], set(), []
    while todo:
        path = todo.pop(0)
        if path in seen or path not in sources:
            continue
        seen.add(path)
        try:
            tree = ast.parse(sources[path])
        except SyntaxError as exc:
            imported = "" if path == solution.spec.entry_file else " (the entry imports it)"
            raise DataError(where or solution.name, f"{path}:{exc.lineno}: syntax error: {exc.msg}{imported}") \
                from None
        found.append((path, tree))
        for node in tree.body:
            todo += [f for name in _module_paths(node, path) for f in (f"{name}.py", f"{name}/__init__.py")]
    return found


def top_level_imports(tree):
    """The top-level module names a module imports unconditionally (at module level, outside try/if), with the
    statement; relative imports are not top-level ones."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            yield from ((a.name.split(".")[0], node) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module.split(".")[0], node


def own_modules(solution):
    """The top-level names the solution's own sources take (files and folders at its root)."""
    return {s.path.split("/")[0].removesuffix(".py") for s in solution.sources}


def check_own_imports(solution, where=None):
    """DataError where an imported source imports one of the solution's own modules as a top-level module that
    nothing installed here provides either: the build does not find it (ModuleNotFoundError, COMPILE_ERROR)."""
    own = own_modules(solution)
    for path, tree in imported_sources(solution, where):
        for top, node in top_level_imports(tree):
            if top in own and not importable(top):
                raise DataError(where or solution.name,
                                f"{path}:{node.lineno} imports its own module '{top}' as a top-level one, which the "
                                "build does not find: it puts the sources in a package and only the package's folder "
                                "on sys.path, as officially",
                                f"import it relatively: from . import {top}, or from .{top} import ...")


def importable(module):
    """Whether a top-level module can be found on this machine."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _module_paths(node, path):
    """The source paths (without .py) an import statement in the source at `path` may load: 'a/b' for `import a.b`
    or `from a import b`, and relative imports resolved against path's folder."""
    if isinstance(node, ast.Import):
        return [a.name.replace(".", "/") for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    folder = path.split("/")[:-1]
    if node.level:
        folder = folder[:len(folder) - (node.level - 1)] if node.level - 1 <= len(folder) else []
    else:
        folder = []
    base = "/".join(folder + (node.module.split(".") if node.module else []))
    return [p.strip("/") for p in [base, *(f"{base}/{a.name}" for a in node.names)] if p.strip("/")]


# modules whose pip package has another name, among those the built-in solutions import
PIP_NAMES = {"flashinfer": "flashinfer-python, or pip install '.[gpu]'", "fla": "flash-linear-attention"}


def missing_modules(solution):
    """Top-level modules that the python sources the build imports (imported_sources) import unconditionally
    and that cannot be found here; the solution's own modules are skipped."""
    own, missing = own_modules(solution), []
    for _, tree in imported_sources(solution):
        for top, _ in top_level_imports(tree):
            if top not in own and top not in missing and not importable(top):
                missing.append(top)
    return missing
