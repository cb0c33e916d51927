"""What can be told about a python/triton solution from its sources alone, before any child starts: an entry
point that is not there or cannot take the call, and modules it imports that this machine lacks. Either one
makes the official build fail (COMPILE_ERROR), so the harness reports it for every pair at once instead of
starting a child per pair to find the same thing."""
import ast
import importlib.util

from harness.data.jsonio import DataError


def _top_level_bindings(tree):
    """{name: node} for every name bound at module level (in ifs and trys too, not inside defs or classes);
    None when a star import makes that unknowable."""
    names, stack = {}, list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.setdefault(node.name, node)
            continue
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.setdefault((a.asname or a.name).split(".")[0], node)
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.setdefault(child.id, node)
            elif isinstance(child, ast.stmt) or isinstance(child, (ast.expr, ast.excepthandler, ast.withitem)):
                stack.append(child)
    return names


def _own_modules(solution):
    return {s.path.split("/")[0].removesuffix(".py") for s in solution.sources}


def missing_modules(solution):
    """Top-level modules that the solution's python sources import unconditionally (at module level, outside
    try/if) and that cannot be found here. Relative imports and the solution's own modules are skipped."""
    own, missing = _own_modules(solution), []
    for src in solution.sources:
        if not src.path.endswith(".py"):
            continue
        try:
            tree = ast.parse(src.content)
        except SyntaxError:
            continue    # the build reports it, with its traceback
        for node in tree.body:
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top not in own and top not in missing and not _importable(top):
                    missing.append(top)
    return missing


def _importable(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def static_problem(solution, definition):
    """Why the official build of this solution would fail, if its sources already tell; else None."""
    if solution.spec.language not in ("python", "triton"):
        return None     # native sources: the compiler says
    from harness.build.package import validate

    entry = next(s.content for s in solution.sources if s.path == solution.spec.entry_file)
    try:
        bound = _top_level_bindings(ast.parse(entry))
    except SyntaxError as exc:
        return f"{solution.spec.entry_file}:{exc.lineno}: syntax error: {exc.msg}"
    symbol = solution.spec.entry_symbol
    if bound is not None and symbol not in bound:
        return (f"entry point '{symbol}' is not defined in {solution.spec.entry_file} "
                f"(it defines: {', '.join(sorted(n for n, v in bound.items() if isinstance(v, ast.FunctionDef))) or 'no function'})")
    if bound is not None and isinstance(bound[symbol], (ast.FunctionDef, ast.AsyncFunctionDef)):
        try:
            validate(solution, definition, solution.name)
        except DataError as exc:
            return exc.message
    missing = missing_modules(solution)
    if missing:
        return (f"imports {', '.join(missing)}, which cannot be imported on this machine "
                "(install it, or evaluate on a machine that has it)")
    return None
