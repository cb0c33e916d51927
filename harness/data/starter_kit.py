"""The contest starter-kit layout: config.toml + solution/{triton,cuda,python}/ -> a Solution."""
import json
import tomllib
from pathlib import Path

from harness.data.jsonio import DataError
from harness.data.solution import LANGUAGES, BuildSpec, Solution, SourceFile, check_source_path

SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints"}
SKIP_SUFFIXES = {".pyc", ".pyo", ".so", ".o"}
# Every key the harness reads, by table, with its TOML type. Anything else is refused: the official packer ignores
# unknown keys, so a typo (entry_pont) would silently fall back to a default.
CONFIG_KEYS = {
    "solution": {"name": str, "definition": str, "author": str, "description": str},
    "build": {"language": str, "entry_point": str, "target_hardware": list, "dependencies": list,
              "destination_passing_style": bool, "binding": str, "source_dir": str},
}
REQUIRED = {"solution": ("name", "definition", "author"), "build": ("language", "entry_point")}
STRICTER = "this harness refuses it, stricter than the official packer, which ignores what it does not know"


def is_starter_kit(path):
    return Path(path).is_dir() and (Path(path) / "config.toml").is_file()


def read_config(folder):
    """(config, path, notes): every table and key known and typed; notes say what was read differently."""
    path = Path(folder) / "config.toml"
    try:
        cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise DataError(path, f"invalid TOML: {exc}") from None
    unknown = sorted(set(cfg) - set(CONFIG_KEYS))
    if unknown:
        raise DataError(path, f"unknown table or top-level key {unknown}; {STRICTER}",
                        "config.toml has the tables [solution] and [build] only")
    notes = []
    for table, keys in CONFIG_KEYS.items():
        if not isinstance(cfg.get(table), dict):
            raise DataError(path, f"missing table [{table}]")
        unknown = sorted(set(cfg[table]) - set(keys))
        if unknown:
            raise DataError(path, f"[{table}] unknown key {unknown}; {STRICTER}",
                            f"the keys of [{table}] are {sorted(keys)}")
        for key in REQUIRED[table]:
            if not isinstance(cfg[table].get(key), str) or not cfg[table][key]:
                raise DataError(path, f"[{table}] needs a non-empty string '{key}'")
        for key, value in cfg[table].items():
            cfg[table][key] = check_value(path, table, key, value, keys[key], notes)
    return cfg, path, notes


def check_value(path, table, key, value, kind, notes):
    """The value as the harness reads it; a single string for a list becomes a one-element list, with a note."""
    if kind is bool and not isinstance(value, bool):
        meant = value.lower() if isinstance(value, str) and value.lower() in ("true", "false") else "true or false"
        raise DataError(path, f"[{table}] {key} must be a TOML boolean, got {type(value).__name__} {value!r}",
                        f"{key} = {meant}, with no quotes")
    if kind is list and isinstance(value, str):
        notes.append(f"{path}: [{table}] {key} = {json.dumps(value)} is a string, read as the one-element list "
                     f"{json.dumps([value])} (write that to silence this)")
        value = [value]
    if not isinstance(value, kind):
        raise DataError(path, f"[{table}] {key} must be a {'string' if kind is str else 'list of strings'}, "
                              f"got {type(value).__name__} {value!r}")
    if kind is list and not all(isinstance(v, str) for v in value):
        raise DataError(path, f"[{table}] {key} must hold strings only, got {value!r}",
                        f"quote every element: {key} = {json.dumps([str(v) for v in value])}")
    return value


def load_starter_kit(folder):
    """Every file under solution/<language>/ (subfolders kept), paths relative to that folder. The Solution's
    `notes` say what config.toml said loosely (the caller prints them)."""
    folder = Path(folder)
    cfg, cfg_path, notes = read_config(folder)
    sol, bld = cfg["solution"], cfg["build"]
    language = bld["language"]
    if language not in LANGUAGES:
        raise DataError(cfg_path, f"[build] language {language!r} is not one of {LANGUAGES}")
    # the official packer reads solution/<source_dir>/ when [build] source_dir is given, else solution/<language>/
    src_root = folder / "solution" / bld.get("source_dir", language)
    check_source_path(bld.get("source_dir", language), cfg_path)
    if not src_root.is_dir():
        there = sorted(p.name for p in (folder / "solution").iterdir() if p.is_dir()) \
            if (folder / "solution").is_dir() else []
        raise DataError(cfg_path, f"no source folder {src_root.relative_to(folder)}/ for language {language!r}",
                        f"move the sources there, or name their folder with [build] source_dir = \"{there[0]}\""
                        if there else "put the sources in it")
    sources = []
    for p in sorted(src_root.rglob("*")):
        rel = p.relative_to(src_root)
        if SKIP_PARTS & set(rel.parts) or p.suffix in SKIP_SUFFIXES:
            continue
        if p.is_symlink():   # before is_dir, which follows a link to a folder (and its files were left out)
            raise DataError(p, "symbolic links are not packed", "copy the file or folder into the solution folder")
        if p.is_dir():
            continue
        check_source_path(rel.as_posix(), p)
        try:
            sources.append(SourceFile(rel.as_posix(), p.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            raise DataError(p, "source file is not UTF-8 text (a Solution JSON holds its sources as text)",
                            "keep binary files out of the source folder; save text as UTF-8") from None
    entry = bld["entry_point"]
    if "::" not in entry:
        raise DataError(cfg_path, f"[build] entry_point {entry!r} must be 'file.ext::symbol'")
    # target_hardware ["cuda"] when absent: the official packer (scripts/pack_solution.py) always writes ["cuda"].
    spec = BuildSpec(language=language, target_hardware=bld.get("target_hardware", ["cuda"]), entry_point=entry,
                     dependencies=bld.get("dependencies", []),
                     destination_passing_style=bld.get("destination_passing_style", True), binding=bld.get("binding"))
    obj = Solution(sol["name"], sol["definition"], sol["author"], spec, sources, sol.get("description"))
    loaded = Solution.from_json(obj.to_json(), cfg_path)  # the same validation as a JSON file
    loaded.notes = notes
    return loaded
