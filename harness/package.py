"""`make package`: submission/<definition>/ (starter-kit layout) -> one contest solution.json each.

Validated before anything is written: the definition exists, the entry point exists with a signature
that fits its style (checked on the source, without running it), every file under solution/<language>/
is packed with its relative path, no path is absolute or climbs out. Differs from the starter kit's
packer on purpose in one way, printed when it applies: files in subfolders are packed too (the kit's
packer takes the top level only, so a solution with subfolders would lose files)."""
import ast
import re
from pathlib import Path

from harness.dataset import Dataset
from harness.jsonio import DataError, write_json_atomic
from harness.starter_kit import is_starter_kit, load_starter_kit

REPO = Path(__file__).resolve().parent.parent


def python_entry_params(source, symbol, where):
    """Positional parameter counts (required, total, has *args) of a top-level def, read from the AST."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise DataError(f"{where}:{exc.lineno}", f"syntax error: {exc.msg}") from None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == symbol:
            a = node.args
            positional = a.posonlyargs + a.args
            return len(positional) - len(a.defaults), len(positional), a.vararg is not None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == symbol for t in node.targets):
            return None  # bound at import time (e.g. an alias): checked when the harness builds it
    raise DataError(where, f"entry point function '{symbol}' is not defined at the top level")


def validate(solution, definition, where):
    spec = solution.spec
    n_in, n_out = len(definition.inputs), len(definition.outputs)
    expected = n_in + n_out if spec.destination_passing_style else n_in
    sources = {s.path: s.content for s in solution.sources}
    entry = sources[spec.entry_file]
    if spec.language in ("python", "triton"):
        params = python_entry_params(entry, spec.entry_symbol, f"{where}/{spec.entry_file}")
        if params:
            required, total, varargs = params
            if not (required <= expected and (varargs or expected <= total)):
                style = "destination-passing" if spec.destination_passing_style else "value-returning"
                raise DataError(f"{where}/{spec.entry_file}", f"'{spec.entry_symbol}' takes {required} required of "
                                f"{total} positional parameters; the {style} style needs {expected} "
                                f"({n_in} inputs{f' + {n_out} outputs' if spec.destination_passing_style else ''})")
    elif not re.search(rf"\b{re.escape(spec.entry_symbol)}\b", entry):
        raise DataError(f"{where}/{spec.entry_file}", f"entry symbol '{spec.entry_symbol}' does not appear in the "
                                                      "entry file")


def package(submission=REPO / "submission", out=REPO / "results" / "package", dataset=None):
    """Validate every starter-kit folder under `submission`, then write <out>/<definition>/solution.json."""
    dataset = dataset or Dataset()
    folders = [p for p in sorted(Path(submission).iterdir()) if is_starter_kit(p)]
    if not folders:
        raise DataError(submission, "no starter-kit folder (config.toml + solution/<language>/) found")
    packed = []
    for folder in folders:  # validate all before writing any
        sol = load_starter_kit(folder)
        definition = dataset.definition(sol.definition)
        validate(sol, definition, folder / "solution" / sol.spec.language)
        packed.append((folder, sol))
    written = []
    for folder, sol in packed:
        path = Path(out) / sol.definition / "solution.json"
        write_json_atomic(path, sol.to_json())
        nested = [s.path for s in sol.sources if "/" in s.path]
        written.append((path, sol, nested))
    return written


ABLATION = {"definition": "gdn_prefill_qk4_v8_d128_k_last", "entry_point": "kernel.py::kernel_recurrent",
            "name": "gdn-harness-prefill-recurrent",
            "description": "Ablation of our prefill submission: the same launch path, gating, I/O and dispatch, "
                           "with a token-by-token register-resident recurrence instead of the chunked "
                           "tensor-core algorithm. Not part of the contest submission."}


def ablation_solution(submission=REPO / "submission"):
    """Our prefill folder with the recurrent entry point: the controlled chunked-vs-scalar experiment."""
    sol = load_starter_kit(Path(submission) / ABLATION["definition"])
    sol.name, sol.description = ABLATION["name"], ABLATION["description"]
    sol.spec.entry_point = ABLATION["entry_point"]
    return sol


def ablation_path(dataset_root=REPO / "workloads"):
    return Path(dataset_root) / "solutions" / "gdn-harness" / "gdn" / ABLATION["definition"] / f"{ABLATION['name']}.json"


def write_ablation(dataset_root=REPO / "workloads"):
    """(Re)write the ablation's solution JSON from the current submission sources."""
    sol = ablation_solution()
    write_json_atomic(ablation_path(dataset_root), sol.to_json())
    return ablation_path(dataset_root)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m harness.package", description=__doc__)
    ap.add_argument("--submission", default=str(REPO / "submission"))
    ap.add_argument("--out", default=str(REPO / "results" / "package"))
    args = ap.parse_args(argv)
    try:
        written = package(args.submission, args.out)
    except DataError as exc:
        print(f"error: {exc}")
        return 2
    print(f"{write_ablation()}: the prefill ablation (not part of the submission), regenerated")
    for path, sol, nested in written:
        print(f"{path}: {sol.name} ({sol.definition}), {len(sol.sources)} source file(s), entry {sol.spec.entry_point}")
        if nested:
            print(f"  note: packed files in subfolders {nested}; the starter kit's packer would have left them out")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
