"""Our submission's sources as the official builder imports them: solution/<language>/ as a package, the entry file
a module of it (its siblings are imported relatively)."""
from pathlib import Path

from harness.build.folder_import import import_from_folder

SUBMISSION = Path(__file__).resolve().parent.parent / "submission"


def solution_dir(definition, language="triton"):
    return SUBMISSION / definition / "solution" / language


def load_solution(definition, entry="kernel", language="triton"):
    """The entry module of submission/<definition>/solution/<language>/, imported as a module of a package made of
    that folder (once per process: the package is kept in sys.modules, as an import keeps it)."""
    return import_from_folder(solution_dir(definition, language), entry, f"_sub_{definition}_{language}")
