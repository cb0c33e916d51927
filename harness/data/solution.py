"""Solution: a named implementation of a definition, its build spec and its source files."""
import hashlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from harness.data.jsonio import DataError, Fields, harness_refuses, loader_refuses, read_json

LANGUAGES = ("python", "triton", "cpp", "cuda", "tilelang")
BINDINGS = ("tvm-ffi", "torch")


@dataclass
class SourceFile:
    path: str
    content: str


@dataclass
class BuildSpec:
    language: str
    target_hardware: list[str]
    entry_point: str                # "file.ext::symbol"
    dependencies: list[str] = field(default_factory=list)
    destination_passing_style: bool = True
    binding: str | None = None

    @property
    def entry_file(self):
        return self.entry_point.split("::")[0]

    @property
    def entry_symbol(self):
        return self.entry_point.split("::")[1]

    def to_json(self):
        return {"language": self.language, "target_hardware": self.target_hardware,
                "entry_point": self.entry_point, "dependencies": self.dependencies,
                "destination_passing_style": self.destination_passing_style, "binding": self.binding}


def check_source_path(path, where):
    p = PurePosixPath(path)
    if not path or p.is_absolute() or ".." in p.parts:
        raise DataError(where, f"source path {path!r} must be relative, without '..'",
                        "use a path like 'kernel.py' or 'sub/helper.py'")
    if "\\" in path:  # FIB takes it, but it names a different file on Windows than on Linux
        raise DataError(where, f"source path {path!r} contains a backslash; this harness refuses it, stricter than "
                               "FlashInfer-Bench's loader (which accepts it)", "use '/' between folders")


def path_segment(f, key, name):
    """A non-empty name or author that is also one folder or file name: the traces go to traces/<author>/, and
    FlashInfer-Bench's export refuses a segment with '/' or '\\', or '.' / '..' (cli/main.py _safe_path_segment)."""
    value = non_empty(f, key, name)
    if "/" in value or "\\" in value or value in (".", ".."):
        raise harness_refuses(f.where, f"solution '{name}'", f"'{key}' {value!r} is not one folder name, which "
                              "traces/<author>/ and solutions/<author>/.../<name>.json need",
                              "its load takes it; its export refuses it",
                              f"give '{key}' without '/', '\\' or a bare '.' / '..'")
    return value


def official_rule(where, name, problem, hint=None):
    """What FIB's pydantic models refuse of a solution (data/solution.py)."""
    return loader_refuses(where, f"solution '{name}'", problem, hint)


def non_empty(f, key, name, prefix=""):
    value = f.req(key, str, prefix)
    if not value:
        raise official_rule(f.where, name, f"'{prefix}{key}' is empty")
    return value


def target_hardware(s, name):
    """FIB's BuildSpec: a list of at least one string, with no default."""
    values = s.obj.get("target_hardware")
    if not values:
        raise official_rule(s.where, name, f"'spec.target_hardware' is missing or empty, got {values!r}",
                            'give at least one, e.g. ["cuda"]')
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise official_rule(s.where, name, f"'spec.target_hardware' must be a list of strings, got {values!r}")
    return values


def dependencies(s, name):
    """FIB's BuildSpec: a list of non-empty strings, [] when left out (null is not a list there either)."""
    values = s.obj.get("dependencies", [])
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise official_rule(s.where, name, f"'spec.dependencies' must be a list of non-empty strings, got {values!r}")
    return values


def destination_passing(s, name):
    """A JSON boolean, true when left out. FIB's pydantic also reads 0/1 and strings such as "false" as booleans;
    refused here, so a quoted "false" cannot silently mean true anywhere."""
    value = s.obj.get("destination_passing_style", True)
    if not isinstance(value, bool):
        raise DataError(s.where, f"solution '{name}': 'spec.destination_passing_style' must be true or false, got "
                                 f"{value!r}; this harness refuses anything else, stricter than FlashInfer-Bench's "
                                 "loader (which coerces 0/1 and strings like \"false\")", "write true or false")
    return value


@dataclass
class Solution:
    name: str
    definition: str
    author: str
    spec: BuildSpec
    sources: list[SourceFile]
    description: str | None = None
    # What a loader read differently from what was written (e.g. a config.toml string taken as a list), for the
    # caller to print; not part of the solution, so not in its JSON or its equality.
    notes: list[str] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def from_json(cls, obj, where):
        f = Fields(obj, where, "solution")
        name = path_segment(f, "name", "")
        s = f.sub("spec", f"solution '{name}'")
        language = s.req("language", str, "spec.")
        if language not in LANGUAGES:
            raise official_rule(where, name, f"'spec.language' must be one of {LANGUAGES}, got {language!r}")
        entry = s.req("entry_point", str, "spec.")
        if entry.count("::") != 1:
            raise official_rule(where, name, f"'spec.entry_point' must be 'file.ext::symbol' with exactly one '::', "
                                             f"got {entry!r}")
        if entry.endswith("::"):
            raise DataError(where, f"solution '{name}': 'spec.entry_point' {entry!r} names no symbol; this harness "
                                   "refuses it at load, stricter than FlashInfer-Bench, whose build fails on it "
                                   "(COMPILE_ERROR)", "write 'file.ext::symbol'")
        binding = s.opt("binding", str)
        if binding is not None and binding not in BINDINGS:
            raise official_rule(where, name, f"'spec.binding' must be one of {BINDINGS} or null, got {binding!r}")
        spec = BuildSpec(language, target_hardware(s, name), entry, dependencies(s, name),
                         destination_passing(s, name), binding)
        sources, seen = [], set()
        for i, src in enumerate(f.req("sources", list)):
            sf = Fields(src, where, f"solution '{name}' sources[{i}]")
            path = sf.req("path", str)
            check_source_path(path, where)
            if path in seen:
                raise official_rule(where, name, f"source path {path!r} appears twice")
            seen.add(path)
            content = sf.req("content", str)
            if not content:
                raise official_rule(where, name, f"source file {path!r} is empty",
                                    "delete the file, or put a comment in it")
            sources.append(SourceFile(path, content))
        if not sources:
            raise official_rule(where, name, "'sources' is empty")
        if spec.entry_file not in seen:
            raise official_rule(where, name, f"entry point file {spec.entry_file!r} is not among the sources "
                                             f"{sorted(seen)}")
        return cls(name, non_empty(f, "definition", name), path_segment(f, "author", name), spec, sources,
                   f.opt("description", str))

    @classmethod
    def load(cls, path):
        obj = read_json(path)
        kind = _other_kind(obj)
        if kind:
            raise DataError(path, f"this is a {kind}, not a solution", "name a solution JSON or a starter-kit folder")
        return cls.from_json(obj, path)

    def to_json(self):
        out = {"name": self.name, "definition": self.definition, "author": self.author}
        if self.description is not None:
            out["description"] = self.description
        out["spec"] = self.spec.to_json()
        out["sources"] = [{"path": s.path, "content": s.content} for s in self.sources]
        return out

    def content_hash(self):
        """Build cache key, over what the official hash covers: definition, language, entry point,
        binding, dependencies and sources; not the name, author, description or target hardware."""
        h = hashlib.sha1()
        for part in (self.definition, self.spec.language, self.spec.entry_point, self.spec.binding or "",
                     *self.spec.dependencies, *[x for s in self.sources for x in (s.path, s.content)]):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()


# the fields by which the dataset's other JSON files are told from a solution (a user may name one by mistake)
OTHER_KINDS = {"definition": {"axes", "inputs", "outputs", "reference"}, "workload": {"uuid", "axes", "inputs"},
               "trace": {"definition", "workload", "evaluation"}}


def _other_kind(obj):
    """'definition', 'workload' or 'trace' where a JSON object without a solution's 'spec' is one of those."""
    if not isinstance(obj, dict) or "spec" in obj:
        return None
    return next((kind for kind, keys in OTHER_KINDS.items() if keys <= set(obj)), None)
