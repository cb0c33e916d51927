"""Workload: concrete var-axis values and where each input comes from (random, scalar, safetensors)."""
from dataclasses import dataclass
from pathlib import PurePosixPath

from harness.data.jsonio import DataError, Fields, harness_refuses, loader_refuses, read_jsonl


@dataclass
class InputSpec:
    type: str                       # "random" | "scalar" | "safetensors"
    value: object = None            # scalar
    path: str | None = None         # safetensors, relative to the dataset root
    tensor_key: str | None = None

    def to_json(self):
        if self.type == "scalar":
            return {"type": "scalar", "value": self.value}
        if self.type == "safetensors":
            return {"type": "safetensors", "path": self.path, "tensor_key": self.tensor_key}
        return {"type": "random"}


@dataclass
class Workload:
    uuid: str
    axes: dict[str, int]
    inputs: dict[str, InputSpec]

    @classmethod
    def from_json(cls, obj, where):
        f = Fields(obj, where, "workload")
        uuid = f.req("uuid", str)
        axes = f.req("axes", dict)
        for k, v in axes.items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise DataError(where, f"workload {uuid}: axis 'axes.{k}' must be an integer, got {v!r}")
            if v < 0:  # FIB's Workload.axes: NonNegativeInt
                raise loader_refuses(where, f"workload {uuid}", f"axis 'axes.{k}' is negative ({v})")
        inputs = {}
        for name, spec in f.req("inputs", dict).items():
            s = Fields(spec, where, f"workload {uuid}")
            kind = s.req("type", str, f"inputs.{name}.")
            if kind == "scalar":
                inputs[name] = InputSpec("scalar", value=s.req("value", (int, float, bool), f"inputs.{name}."))
            elif kind == "safetensors":
                path = s.req("path", str, f"inputs.{name}.")
                p = PurePosixPath(path)
                if p.is_absolute() or ".." in p.parts:
                    raise DataError(where, f"workload {uuid}: 'inputs.{name}.path' {path!r} escapes the dataset "
                                           "root", "use a path relative to the root, e.g. ./blob/...")
                inputs[name] = InputSpec("safetensors", path=path,
                                         tensor_key=s.req("tensor_key", str, f"inputs.{name}."))
            elif kind == "random":
                inputs[name] = InputSpec("random")
            else:
                raise DataError(where, f"workload {uuid}: 'inputs.{name}.type' must be random, scalar or "
                                       f"safetensors, got {kind!r}")
        return cls(uuid, dict(axes), inputs)

    def to_json(self):
        return {"uuid": self.uuid, "axes": self.axes, "inputs": {k: s.to_json() for k, s in self.inputs.items()}}

    def check_against(self, definition, where):
        """Axes and inputs must match the definition exactly; say which is off. FIB's loader checks neither: its
        run ignores an unknown axis or input (a blob input it does not know fails that workload's baseline), draws
        a missing input at random and fails on a missing axis when that workload's shapes are computed."""
        var = set(definition.var_axes())
        if set(self.axes) != var:
            missing, extra = sorted(var - set(self.axes)), sorted(set(self.axes) - var)
            raise harness_refuses(where, f"workload {self.uuid}", f"axes do not match definition "
                                  f"'{definition.name}' (missing {missing}, unknown {extra})",
                                  "which accepts it: an unknown axis is ignored, a missing one fails that "
                                  "workload when it runs")
        if set(self.inputs) != set(definition.inputs):
            missing = sorted(set(definition.inputs) - set(self.inputs))
            extra = sorted(set(self.inputs) - set(definition.inputs))
            raise harness_refuses(where, f"workload {self.uuid}", f"inputs do not match definition "
                                  f"'{definition.name}' (missing {missing}, unknown {extra})",
                                  "which accepts it: a missing input is drawn at random, an unknown one is ignored "
                                  "or, if it names a blob, skips that workload")


def load_workloads(path):
    """Read a workload JSONL file: each line {definition, solution: null, workload, evaluation: null}."""
    out = []
    for where, obj in read_jsonl(path):
        f = Fields(obj, where, "workload line")
        out.append((f.req("definition", str), Workload.from_json(f.req("workload", dict), where), where))
    return out


def workload_line(definition_name, workload):
    return {"definition": definition_name, "solution": None, "workload": workload.to_json(), "evaluation": None}
