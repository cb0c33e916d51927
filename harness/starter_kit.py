"""The contest starter-kit layout: config.toml + solution/{triton,cuda,python}/ -> a Solution."""
import tomllib
from pathlib import Path

from harness.jsonio import DataError
from harness.solution import LANGUAGES, BuildSpec, Solution, SourceFile, check_source_path

SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints"}
SKIP_SUFFIXES = {".pyc", ".pyo", ".so", ".o"}


def is_starter_kit(path):
    return Path(path).is_dir() and (Path(path) / "config.toml").is_file()


def read_config(folder):
    path = Path(folder) / "config.toml"
    try:
        cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise DataError(path, f"invalid TOML: {exc}") from None
    for table, keys in (("solution", ("name", "definition", "author")), ("build", ("language", "entry_point"))):
        if not isinstance(cfg.get(table), dict):
            raise DataError(path, f"missing table [{table}]")
        for key in keys:
            if not isinstance(cfg[table].get(key), str) or not cfg[table][key]:
                raise DataError(path, f"[{table}] needs a non-empty string '{key}'")
    return cfg, path


def load_starter_kit(folder):
    """Every file under solution/<language>/ (subfolders kept), paths relative to that folder."""
    folder = Path(folder)
    cfg, cfg_path = read_config(folder)
    sol, bld = cfg["solution"], cfg["build"]
    language = bld["language"]
    if language not in LANGUAGES:
        raise DataError(cfg_path, f"[build] language {language!r} is not one of {LANGUAGES}")
    src_root = folder / "solution" / language
    if not src_root.is_dir():
        raise DataError(cfg_path, f"no source folder {src_root.relative_to(folder)}/ for language {language!r}")
    sources = []
    for p in sorted(src_root.rglob("*")):
        rel = p.relative_to(src_root)
        if p.is_dir() or SKIP_PARTS & set(rel.parts) or p.suffix in SKIP_SUFFIXES:
            continue
        if p.is_symlink():
            raise DataError(p, "symbolic links are not packed", "copy the file into the solution folder")
        check_source_path(rel.as_posix(), p)
        try:
            sources.append(SourceFile(rel.as_posix(), p.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            raise DataError(p, "source file is not UTF-8 text") from None
    entry = bld["entry_point"]
    if "::" not in entry:
        raise DataError(cfg_path, f"[build] entry_point {entry!r} must be 'file.ext::symbol'")
    spec = BuildSpec(language=language, target_hardware=list(bld.get("target_hardware", ["cuda"])),
                     entry_point=entry, dependencies=list(bld.get("dependencies", [])),
                     destination_passing_style=bool(bld.get("destination_passing_style", True)),
                     binding=bld.get("binding"))
    obj = Solution(sol["name"], sol["definition"], sol["author"], spec, sources, sol.get("description"))
    return Solution.from_json(obj.to_json(), cfg_path)  # the same validation as a JSON file
