"""Resolve what a user names as a solution: a JSON file, a starter-kit folder, a dataset root, or a
built-in name: reference (the definition's own code), ours (submission/<definition>/), ablation (our
prefill ablation, made from submission/), or an author in the dataset: baseline (the FlashInfer baselines),
fla (the FLA peers), ..."""
from pathlib import Path

from harness import REPO
from harness.data.jsonio import DataError
from harness.data.solution import BuildSpec, Solution, SourceFile
from harness.data.starter_kit import is_starter_kit, load_starter_kit

SUBMISSION = REPO / "submission"
OUR_AUTHOR = "gdn-harness"
ABLATION_NAME = "ablation"   # the built-in name of our_extras; not OUR_AUTHOR, which `ours` shares

# Our prefill submission with its token-by-token recurrent entry point: the chunked-vs-scalar experiment (same
# launch path, gating, I/O and dispatch). Made from submission/ whenever it is named, so it cannot go stale.
ABLATION = {"definition": "gdn_prefill_qk4_v8_d128_k_last", "entry_point": "kernel.py::kernel_recurrent",
            "name": "gdn-harness-prefill-recurrent",
            "description": "Ablation of our prefill submission: the same launch path, gating, I/O and dispatch, "
                           "with a token-by-token register-resident recurrence instead of the chunked "
                           "tensor-core algorithm. Not part of the contest submission."}


def reference_solution(definition):
    """The definition's own reference as a value-returning python solution."""
    spec = BuildSpec(language="python", target_hardware=["cuda"], entry_point="main.py::run",
                     destination_passing_style=False)
    return Solution("reference", definition.name, "__builtin__", spec,
                    [SourceFile("main.py", definition.reference)], "the definition's reference code")


def our_extras(definition, submission=SUBMISSION):
    """Our extra solutions of a definition (the prefill ablation), made from the submission's sources."""
    if definition.name != ABLATION["definition"]:
        return []
    sol = load_starter_kit(Path(submission) / ABLATION["definition"])
    sol.name, sol.author, sol.description = ABLATION["name"], OUR_AUTHOR, ABLATION["description"]
    sol.spec.entry_point = ABLATION["entry_point"]
    return [sol]


def _from_path(arg):
    path = Path(arg)
    if arg == OUR_AUTHOR and not path.exists():
        raise DataError(arg, "is the author of our submission and of its prefill ablation",
                        "name ours (the submission) or ablation (gdn-harness-prefill-recurrent)")
    if not path.exists():
        raise DataError(arg, "no such solution file or folder, and no author of that name in the dataset",
                        "give a solution .json, a starter-kit folder, a dataset root, reference, ours, or an "
                        "author (baseline, fla, ...)")
    if path.is_file() and path.name == "config.toml" and is_starter_kit(path.parent):
        raise DataError(arg, "is a starter kit's config.toml", f"name the kit's folder: --solution {path.parent}")
    if path.is_file() and path.suffix != ".json":
        kit = next((p for p in path.parents if is_starter_kit(p)), None)
        raise DataError(arg, f"is a source file of the starter kit {kit}" if kit else
                        "is not a solution JSON (.json)",
                        f"name the kit's folder: --solution {kit}" if kit else
                        "name a starter-kit folder (config.toml beside solution/<language>/) or a solution .json")
    if path.is_file():
        return [Solution.load(path)]
    if path.is_dir() and (path / "traces").is_dir() and not is_starter_kit(path):
        raise DataError(arg, "is a run's output folder (it holds traces/), not a solution",
                        f"name the solutions themselves; to table its traces: gdn-harness report {arg}")
    if is_starter_kit(path):
        return [load_starter_kit(path)]
    if (path / "solutions").is_dir():
        from harness.data.dataset import Dataset
        if (path / "definitions").is_dir():
            return Dataset(path).solutions()
        return [Solution.load(p) for p in sorted((path / "solutions").rglob("*.json"))]
    found = [Solution.load(p) for p in sorted(path.rglob("*.json"))]
    if not found:
        kits = [str(p) for p in sorted(path.iterdir()) if p.is_dir() and is_starter_kit(p)]
        raise DataError(arg, "holds no solution: not a starter-kit folder (config.toml and solution/<language>/), "
                             "not a dataset root (solutions/), and no solution JSON under it",
                        f"it holds starter kits: name one, or each with its own --solution: {', '.join(kits)}"
                        if kits else "a starter kit needs a config.toml beside solution/<language>/ (see examples/)")
    return found


def _is_author(arg, dataset):
    return any(s.author == arg for s in dataset.solutions())


def definitions_of(args, dataset):
    """The definitions a list of solution arguments covers, in name order: those of the solution files, kits and
    dataset roots named; a built-in name or an author stands for every definition it has a solution for when no
    such path is named (with one, it joins that path's definitions: `--solution my_decode_kit --solution baseline`
    is a decode run)."""
    paths, names = set(), set()
    for arg in args:
        if arg in ("reference", "ours"):
            names |= set(dataset.definitions)
        elif arg == ABLATION_NAME:
            names.add(ABLATION["definition"])
        elif _is_author(arg, dataset):
            names |= {s.definition for s in dataset.solutions() if s.author == arg}
        else:
            for s in _from_path(arg):
                if s.definition not in dataset.definitions:
                    raise DataError(arg, f"solution {s.name!r} is for definition {s.definition!r}, which "
                                         f"{dataset.root} does not have", f"one of {sorted(dataset.definitions)}")
                paths.add(s.definition)
    return sorted(paths or names)


def resolve(arg, definition, dataset, strict=True):
    """The solutions `arg` names for the definition (a dataset root may hold several). strict: a path that
    holds no solution for it is an error (else: none)."""
    if arg == "reference":
        return [reference_solution(definition)]
    if arg == "ours":
        return [load_starter_kit(SUBMISSION / definition.name)]
    if arg == ABLATION_NAME:
        return our_extras(definition)
    if _is_author(arg, dataset):
        return [s for s in dataset.solutions(definition.name) if s.author == arg]
    if arg == "baseline":
        raise DataError(dataset.root / "solutions", f"no baseline solution for {definition.name!r}")
    sols = [s for s in _from_path(arg) if s.definition == definition.name]
    if not sols and strict:
        held = sorted({s.definition for s in _from_path(arg)})
        raise DataError(arg, f"holds no solution for definition {definition.name!r}"
                        + (f" (it holds {', '.join(held)})" if held else ""))
    return sols
