"""`make package`: submission/<definition>/ (starter-kit layout) -> one contest solution.json each, under --out only.

Validated before anything is written: config.toml's tables, keys and types; one kit per definition; the
definition exists; FlashInfer-Bench's loader rules (Solution.from_json); the entry point exists with a signature
that fits its style and, for a value-returning one, a return annotation FIB's build accepts (both read from the
source, without running it, where the source says them: one def, undecorated or under decorators that keep its
signature such as @torch.no_grad(), see entry_def; where it does not, a note says the signature was not checked);
every file under solution/<language>/ is packed with its relative path, no path is absolute or climbs out. Where
the starter kit's own packer would write something else (files in subfolders or of other suffixes, target_hardware
and dependencies as config.toml says, the description), it is printed."""
import ast
import inspect
import re
from pathlib import Path

from harness import REPO
from harness.build.builders import return_annotation_problem
from harness.build.imports import check_own_imports, missing_modules
from harness.data.dataset import Dataset
from harness.data.jsonio import DataError, write_json_atomic
from harness.data.starter_kit import is_starter_kit, load_starter_kit



# Calls through which a module can bind names the AST does not show (globals()["run"] = ..., exec(...), ...).
DYNAMIC_BINDERS = {"globals", "vars", "exec", "setattr"}


def module_bindings(tree):
    """{name: [nodes that bind it]} for every name bound at module level (in ifs, trys, loops and withs too, not
    inside defs or classes); None when the module can bind names the source does not show: a star import, a module
    __getattr__, or a call of globals/vars/exec/setattr."""
    names, stack = {}, list(tree.body)
    if any(isinstance(n, ast.Name) and n.id in DYNAMIC_BINDERS for n in ast.walk(tree)):
        return None
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.setdefault(node.name, []).append(node)
            continue
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.setdefault((a.asname or a.name).split(".")[0], []).append(node)
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.setdefault(child.id, []).append(node)
            elif isinstance(child, ast.stmt) or isinstance(child, (ast.expr, ast.excepthandler, ast.withitem)):
                stack.append(child)
    if "__getattr__" in names:
        return None
    return names


# Decorators after which inspect.signature of the entry is the def's own: torch's grad modes wrap the def with
# functools.wraps, with or without the call (@torch.no_grad and @torch.no_grad() alike), and inspect.signature
# follows __wrapped__ back to the def. Any other decorator may change the signature (a wrapper taking *args, a jit
# object), so only the build, which sees the object bound to the name, can judge it.
SIGNATURE_KEEPING = {f"{module}.{name}" for module in ("torch", "torch.autograd", "torch.autograd.grad_mode")
                     for name in ("no_grad", "inference_mode", "enable_grad")}


def _origin(node, name):
    """The dotted path of what the import `node` binds `name` to; None for a binding by anything but an import."""
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname == name:
                return a.name
            if a.asname is None and a.name.split(".")[0] == name:
                return name
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
        for a in node.names:
            if (a.asname or a.name) == name:
                return f"{node.module}.{a.name}"
    return None


def qualified_name(expr, tree, bindings):
    """'torch.no_grad' for `torch.no_grad` under `import torch`, or `no_grad` under `from torch import no_grad`:
    where the module's imports alone bind the name the expression starts with; else None."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    if any(isinstance(n, ast.Global) and expr.id in n.names for n in ast.walk(tree)):
        return None
    origins = {_origin(node, expr.id) for node in bindings.get(expr.id, [])}
    if len(origins) != 1 or None in origins:
        return None
    return ".".join([origins.pop(), *reversed(parts)])


def keeps_signature(decorator, tree, bindings):
    """Whether `decorator` is one of SIGNATURE_KEEPING, bare or called without arguments (inference_mode: or with
    its one bool)."""
    call = decorator if isinstance(decorator, ast.Call) else None
    name = qualified_name(call.func if call else decorator, tree, bindings)
    if name not in SIGNATURE_KEEPING:
        return False
    if call is None or not (call.args or call.keywords):
        return True
    args = call.args + [k.value for k in call.keywords]
    return (name.endswith(".inference_mode") and len(args) == 1 and all(k.arg == "mode" for k in call.keywords)
            and isinstance(args[0], ast.Constant) and isinstance(args[0].value, bool))


def missing_entry(symbol, entry_file, bindings):
    """What to say of an entry point its module does not bind: the functions it defines instead."""
    defs = sorted(n for n, nodes in bindings.items() if any(isinstance(v, ast.FunctionDef) for v in nodes))
    return f"entry point '{symbol}' is not defined in {entry_file} (it defines: {', '.join(defs) or 'no function'})"


def entry_def(source, symbol, where):
    """(the module's AST, the def of `symbol` whose signature the built entry point has, or None, and why it is None:
    a phrase for the user). FIB checks inspect.signature of the object the import leaves bound to the name; the
    source says that signature only when the name's one module-level binding is a def, undecorated or under
    SIGNATURE_KEEPING decorators only. Otherwise (decorated otherwise: a wrapper, a jit object; bound by an import,
    an assignment or a class; bound twice, e.g. `run = wrap(run)` after the def; declared global in a function; or
    bound in ways the source does not show) the harness's build-time check, on the real object, judges it."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise DataError(f"{where}:{exc.lineno}", f"syntax error: {exc.msg}") from None
    bindings = module_bindings(tree)
    if bindings is None:
        return tree, None, ("the module can bind names its source does not show (a star import, a module "
                            "__getattr__, globals(), vars(), exec or setattr)")
    if symbol not in bindings:
        raise DataError(where, missing_entry(symbol, where.rsplit("/", 1)[-1], bindings))
    (node, *again) = bindings[symbol]
    if again:
        return tree, None, f"'{symbol}' is bound {len(again) + 1} times at module level"
    if any(isinstance(n, ast.Global) and symbol in n.names for n in ast.walk(tree)):
        return tree, None, f"'{symbol}' is declared global in a function"
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        how = ("an import" if isinstance(node, (ast.Import, ast.ImportFrom)) else
               "a class" if isinstance(node, ast.ClassDef) else "an assignment")
        return tree, None, f"'{symbol}' is bound by {how}, not a def"
    unknown = [d for d in node.decorator_list if not keeps_signature(d, tree, bindings)]
    if unknown:
        return tree, None, (f"it is decorated with {' '.join('@' + ast.unparse(d) for d in unknown)}, which may "
                            "change it")
    return tree, node, None


def parameters_problem(node, expected, n_in, n_out, dps, symbol):
    """The official positional bind, read off the def: None when `expected` positional arguments fit."""
    a = node.args
    positional = a.posonlyargs + a.args
    required, total = len(positional) - len(a.defaults), len(positional)
    if required <= expected and (a.vararg is not None or expected <= total):
        return None
    style = "Destination-passing" if dps else "Value-returning"  # FIB's words, then what the def takes
    return (f"{style} style callable: expected {expected} positional parameters ({n_in} inputs"
            f"{f' + {n_out} outputs' if dps else ''}), but '{symbol}' takes {required} required of {total}")


# Annotations whose value is known without running the module: FIB's check looks only at whether it is None,
# a tuple[...] (and its length) or anything else.
TUPLE_NAMES = {"tuple", "Tuple"}


class StaticTuple:
    """Stands in for a `tuple[...]` annotation read from the source: FIB's check reads __origin__ and __args__."""
    __origin__ = tuple

    def __init__(self, text, n):
        self.text, self.__args__ = text, (object,) * n

    def __str__(self):
        return self.text


def static_annotation(tree, node):
    """The def's return annotation as inspect.signature would give it, where the source alone says; else
    Signature.empty (nothing to check here): none written, or one that depends on names the module binds
    (an alias), which the build-time check then sees."""
    ann = node.returns
    if ann is None:
        return inspect.Signature.empty
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
                 any(a.name == "annotations" for a in n.names) for n in tree.body)
    if future:  # every annotation stays a string, which FIB's check takes as "not a tuple"
        return ast.unparse(ann)
    if isinstance(ann, ast.Constant) and (ann.value is None or isinstance(ann.value, str)):
        return ann.value
    base = ann.value if isinstance(ann, ast.Subscript) else ann
    name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
    if isinstance(ann, ast.Subscript) and name in TUPLE_NAMES:
        n = len(ann.slice.elts) if isinstance(ann.slice, ast.Tuple) else 1
        return StaticTuple(ast.unparse(ann), n)
    if name == "Tensor" and not isinstance(ann, ast.Subscript):
        return ast.unparse(ann)  # torch.Tensor: not a tuple
    return inspect.Signature.empty


def validate(solution, definition, where):
    """Refuse (DataError) what the official build would refuse and the sources already show. Returns None, or a
    note where the entry's signature could not be read from its source and was left to the build."""
    spec = solution.spec
    n_in, n_out = len(definition.inputs), len(definition.outputs)
    dps = spec.destination_passing_style
    expected = n_in + n_out if dps else n_in
    sources = {s.path: s.content for s in solution.sources}
    entry, at = sources[spec.entry_file], f"{where}/{spec.entry_file}"
    if spec.language in ("python", "triton"):
        tree, node, why = entry_def(entry, spec.entry_symbol, at)
        check_own_imports(solution, where)     # the sources the entry imports parse, and are found as it imports them
        if node is None:
            return (f"the signature of entry point '{spec.entry_symbol}' was not checked: {why}; the build checks "
                    "the object bound to the name (a wrong one: COMPILE_ERROR on every workload)")
        problem = parameters_problem(node, expected, n_in, n_out, dps, spec.entry_symbol)
        if problem is None and not dps:
            problem = return_annotation_problem(static_annotation(tree, node), n_out)
        if problem:
            raise DataError(at, f"{problem} (the official build-time check; it gives COMPILE_ERROR)")
    elif not re.search(rf"\b{re.escape(spec.entry_symbol)}\b", entry):
        raise DataError(at, f"entry symbol '{spec.entry_symbol}' does not appear in the entry file")


def definition_of(dataset, solution, cfg_path):
    known = dataset.definitions
    if solution.definition not in known:
        raise DataError(cfg_path, f"[solution] definition: unknown definition {solution.definition!r} (not in "
                                  f"{dataset.root / 'definitions'})", f"one of {sorted(known)}")
    return known[solution.definition]


def package(submission=REPO / "submission", out=Path("results/package"), dataset=None):
    """Validate `submission` (one starter-kit folder, or a folder of them), then write
    <out>/<definition>/solution.json for each; nothing is written anywhere else. Returns (path, solution, notes)
    per kit: where its entry's signature was left to the build (validate), the modules it imports that are not
    installed here, then kit_packer_differences."""
    dataset = dataset or Dataset()
    submission = Path(submission)
    if not submission.is_dir():
        raise DataError(submission, "not a folder" if submission.exists() else "no such folder",
                        f"give the kit's folder: --submission {submission.parent}" if submission.name == "config.toml"
                        else "give a starter-kit folder or a folder of them")
    folders = [submission] if is_starter_kit(submission) else [
        p for p in sorted(submission.iterdir()) if is_starter_kit(p)]
    if not folders:
        raise DataError(submission, "no starter-kit folder (config.toml + solution/<language>/) found")
    packed = {}
    for folder in folders:  # validate all before writing any
        sol = load_starter_kit(folder)
        definition = definition_of(dataset, sol, folder / "config.toml")
        if sol.definition in packed:  # both would write <out>/<definition>/solution.json
            raise DataError(folder / "config.toml", f"[solution] definition {sol.definition!r} is also packed from "
                                                    f"{packed[sol.definition][0]}; one kit per definition per run",
                            "move one of the two folders out of the submission folder")
        unchecked = validate(sol, definition, folder / "solution" / sol.spec.language)
        notes = [unchecked] if unchecked else []
        missing = missing_modules(sol)
        if missing:   # packed all the same: the evaluator's machine may have them
            notes.append(f"imports {', '.join(missing)}, which cannot be imported here: the evaluator's machine "
                         "must have them (an eval here gives COMPILE_ERROR)")
        packed[sol.definition] = (folder, sol, notes)
    written = []
    for _, sol, notes in packed.values():
        path = Path(out) / sol.definition / "solution.json"
        write_json_atomic(path, sol.to_json())
        written.append((path, sol, notes + kit_packer_differences(sol)))
    return written


KIT_PACKER_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".c", ".h", ".hpp")


def kit_packer_differences(solution):
    """Where the contest starter kit's own packer (scripts/pack_solution.py) would write another solution.json for
    this kit, or none: it takes the top level of the source folder only, files of the suffixes above only, writes
    target_hardware ["cuda"], dependencies [] and no binding whatever config.toml says, no description, and packs
    triton and cuda kits only. One line each, for the user to see."""
    notes = []
    nested = [s.path for s in solution.sources if "/" in s.path]
    if nested:
        notes.append(f"packed files in subfolders {nested}; the starter kit's packer would have left them out")
    other = [s.path for s in solution.sources if not s.path.endswith(KIT_PACKER_SUFFIXES)]
    if other:
        notes.append(f"packed {other}; the starter kit's packer takes only {' '.join(KIT_PACKER_SUFFIXES)} files")
    if solution.spec.target_hardware != ["cuda"] or solution.spec.dependencies:
        notes.append(f"target_hardware {solution.spec.target_hardware} and dependencies {solution.spec.dependencies} "
                     "are packed as config.toml says; the starter kit's packer writes [\"cuda\"] and []")
    if solution.description:
        notes.append("the description is packed; the starter kit's packer leaves it out")
    if solution.spec.binding:
        notes.append(f"binding {solution.spec.binding!r} is packed; the starter kit's packer leaves it unset (tvm-ffi)")
    if solution.spec.language not in ("triton", "cuda"):
        notes.append(f"language {solution.spec.language!r}: the starter kit's packer packs triton and cuda kits only "
                     "(FlashInfer-Bench itself loads and builds this one)")
    return notes
