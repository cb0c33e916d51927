"""Solution: a named implementation of a definition, its build spec and its source files."""
import hashlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from harness.jsonio import DataError, Fields, read_json

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
    if not path or p.is_absolute() or ".." in p.parts or "\\" in path:
        raise DataError(where, f"source path {path!r} must be relative, without '..' or backslashes",
                        "use a path like 'kernel.py' or 'sub/helper.py'")


@dataclass
class Solution:
    name: str
    definition: str
    author: str
    spec: BuildSpec
    sources: list[SourceFile]
    description: str | None = None

    @classmethod
    def from_json(cls, obj, where):
        f = Fields(obj, where, "solution")
        name = f.req("name", str)
        s = f.sub("spec", f"solution '{name}'")
        language = s.req("language", str, "spec.")
        if language not in LANGUAGES:
            raise DataError(where, f"solution '{name}': 'spec.language' must be one of {LANGUAGES}, got {language!r}")
        entry = s.req("entry_point", str, "spec.")
        if entry.count("::") != 1 or not all(entry.split("::")):
            raise DataError(where, f"solution '{name}': 'spec.entry_point' must be 'file.ext::symbol' with exactly "
                                   f"one '::', got {entry!r}")
        binding = s.opt("binding", str)
        if binding is not None and binding not in BINDINGS:
            raise DataError(where, f"solution '{name}': 'spec.binding' must be one of {BINDINGS} or null")
        spec = BuildSpec(language, s.opt("target_hardware", list, []), entry, s.opt("dependencies", list, []),
                         s.opt("destination_passing_style", bool, True), binding)
        sources, seen = [], set()
        for i, src in enumerate(f.req("sources", list)):
            sf = Fields(src, where, f"solution '{name}' sources[{i}]")
            path = sf.req("path", str)
            check_source_path(path, where)
            if path in seen:
                raise DataError(where, f"solution '{name}': source path {path!r} appears twice")
            seen.add(path)
            sources.append(SourceFile(path, sf.req("content", str)))
        if not sources:
            raise DataError(where, f"solution '{name}': 'sources' is empty")
        if spec.entry_file not in seen:
            raise DataError(where, f"solution '{name}': entry point file {spec.entry_file!r} is not among the "
                                   f"sources {sorted(seen)}")
        return cls(name, f.req("definition", str), f.req("author", str), spec, sources, f.opt("description", str))

    @classmethod
    def load(cls, path):
        return cls.from_json(read_json(path), path)

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
