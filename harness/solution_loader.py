"""Resolve what a user names as a solution: a JSON file, a starter-kit folder, a dataset root, or a
built-in name: reference (the definition's own code), ours (submission/<definition>/), or the name of an
author in the dataset: baseline (the FlashInfer baselines), fla (the FLA peers), gdn-harness, ..."""
from pathlib import Path

from harness.jsonio import DataError
from harness.solution import BuildSpec, Solution, SourceFile
from harness.starter_kit import is_starter_kit, load_starter_kit

REPO = Path(__file__).resolve().parent.parent
SUBMISSION = REPO / "submission"


def reference_solution(definition):
    """The definition's own reference as a value-returning python solution."""
    spec = BuildSpec(language="python", target_hardware=["cuda"], entry_point="main.py::run",
                     destination_passing_style=False)
    return Solution("reference", definition.name, "__builtin__", spec,
                    [SourceFile("main.py", definition.reference)], "the definition's reference code")


def resolve(arg, definition, dataset):
    """A list of solutions for the definition (a dataset root may hold several)."""
    if arg == "reference":
        return [reference_solution(definition)]
    if arg == "ours":
        return [load_starter_kit(SUBMISSION / definition.name)]
    by_author = [s for s in dataset.solutions(definition.name) if s.author == arg]
    if by_author:
        return by_author
    if arg == "baseline":
        raise DataError(dataset.root / "solutions", f"no baseline solution for {definition.name!r}")
    path = Path(arg)
    if not path.exists():
        raise DataError(arg, "no such solution file or folder, and no author of that name in the dataset",
                        "give a solution .json, a starter-kit folder, a dataset root, reference, ours, or an "
                        "author (baseline, fla, ...)")
    if path.is_file():
        sols = [Solution.load(path)]
    elif is_starter_kit(path):
        sols = [load_starter_kit(path)]
    elif (path / "solutions").is_dir():
        from harness.dataset import Dataset
        sols = Dataset(path).solutions(definition.name) if (path / "definitions").is_dir() else [
            Solution.load(p) for p in sorted((path / "solutions").rglob("*.json"))]
    else:
        sols = [Solution.load(p) for p in sorted(path.rglob("*.json"))]
    sols = [s for s in sols if s.definition == definition.name]
    if not sols:
        raise DataError(arg, f"holds no solution for definition {definition.name!r}")
    return sols
