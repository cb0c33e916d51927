"""Definition: the operator's axes, inputs, outputs, constraints and reference source."""
import ast
from dataclasses import dataclass, field

from harness.data.jsonio import DataError, Fields, harness_refuses, loader_refuses, read_json

# FIB's DType enum (data/definition.py): nothing else loads there
DTYPES = {"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
          "int64", "int32", "int16", "int8", "bool"}
NOT_OFFICIAL_DTYPES = {"float64", "uint8"}  # torch has them, FIB does not: refused with the official rule


def check_reference(where, name, source):
    """FIB's Definition validator: the reference parses and has a top-level `def run` (an ast.FunctionDef in the
    module body: not async, not assigned, not in a class or under an if)."""
    try:
        module = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        raise loader_refuses(where, f"definition '{name}'", f"'reference' is not valid Python ({exc.msg}, line "
                                                             f"{exc.lineno})") from None
    if not any(isinstance(node, ast.FunctionDef) and node.name == "run" for node in module.body):
        raise loader_refuses(where, f"definition '{name}'", "'reference' defines no top-level function 'run'",
                             "define it with a module-level 'def run(...)'")


@dataclass
class Axis:
    type: str                       # "const" | "var"
    value: int | None = None        # const only
    description: str | None = None

    def to_json(self):
        out = {"type": self.type}
        if self.type == "const":
            out["value"] = self.value
        if self.description is not None:
            out["description"] = self.description
        return out


@dataclass
class TensorSpec:
    shape: list[str] | None         # None: a scalar
    dtype: str
    description: str | None = None
    optional: bool | None = None

    def to_json(self):
        out = {"shape": self.shape, "dtype": self.dtype}
        if self.description is not None:
            out["description"] = self.description
        if self.optional is not None:
            out["optional"] = self.optional
        return out


@dataclass
class Definition:
    name: str
    op_type: str
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]   # dict order is the call order
    outputs: dict[str, TensorSpec]
    reference: str
    tags: list[str] = field(default_factory=list)
    description: str | None = None
    constraints: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, obj, where):
        f = Fields(obj, where, "definition")
        name = f.req("name", str)
        axes = {}
        for key, spec in f.req("axes", dict).items():
            a = Fields(spec, where, f"definition '{name}'")
            kind = a.req("type", str, f"axes.{key}.")
            if kind not in ("const", "var"):
                raise DataError(where, f"definition '{name}': field 'axes.{key}.type' must be 'const' or "
                                       f"'var', got {kind!r}")
            value = a.req("value", int, f"axes.{key}.") if kind == "const" else None
            if value is not None and value < 0:  # FIB's AxisConst: NonNegativeInt
                raise loader_refuses(where, f"definition '{name}'", f"const axis 'axes.{key}.value' is negative "
                                                                     f"({value})")
            axes[key] = Axis(kind, value, a.opt("description", str))
        tensors = {}
        for part in ("inputs", "outputs"):
            tensors[part] = {}
            for key, spec in f.req(part, dict).items():
                t = Fields(spec, where, f"definition '{name}'")
                shape = t.opt("shape", list, prefix=f"{part}.{key}.")
                dtype = t.req("dtype", str, f"{part}.{key}.")
                if dtype in NOT_OFFICIAL_DTYPES:
                    raise loader_refuses(where, f"definition '{name}'", f"field '{part}.{key}.dtype' is {dtype!r}, "
                                                                         "which is not in its DType enum",
                                         f"use one of {sorted(DTYPES)}")
                if dtype not in DTYPES:
                    raise DataError(where, f"definition '{name}': field '{part}.{key}.dtype' has unknown dtype "
                                           f"{dtype!r}", f"use one of {sorted(DTYPES)}")
                for dim in shape or []:
                    if dim not in axes:
                        raise DataError(where, f"definition '{name}': field '{part}.{key}.shape' names unknown "
                                               f"axis {dim!r}", f"declare it under 'axes' ({sorted(axes)})")
                tensors[part][key] = TensorSpec(shape, dtype, t.opt("description", str), t.opt("optional", bool))
        if not tensors["outputs"]:
            raise harness_refuses(where, f"definition '{name}'", "'outputs' is empty", "which accepts it")
        overlap = set(tensors["inputs"]) & set(tensors["outputs"])
        if overlap:
            raise DataError(where, f"definition '{name}': names both input and output: {sorted(overlap)}")
        reference = f.req("reference", str)
        check_reference(where, name, reference)
        constraints = f.opt("constraints", list, [])
        for c in constraints:
            if not isinstance(c, str):
                raise DataError(where, f"definition '{name}': every entry of 'constraints' must be a string")
            try:
                compile(c, f"{where}:constraints", "eval")
            except SyntaxError as exc:
                raise DataError(where, f"definition '{name}': constraint {c!r} is not a Python expression: "
                                       f"{exc.msg}") from None
        return cls(name=name, op_type=f.req("op_type", str), axes=axes, inputs=tensors["inputs"],
                   outputs=tensors["outputs"], reference=reference, tags=f.opt("tags", list, []),
                   description=f.opt("description", str), constraints=constraints)

    @classmethod
    def load(cls, path):
        return cls.from_json(read_json(path), path)

    def to_json(self):
        out = {"name": self.name}
        if self.description is not None:
            out["description"] = self.description
        out.update({"op_type": self.op_type, "tags": self.tags,
                    "axes": {k: a.to_json() for k, a in self.axes.items()},
                    "constraints": self.constraints,
                    "inputs": {k: t.to_json() for k, t in self.inputs.items()},
                    "outputs": {k: t.to_json() for k, t in self.outputs.items()},
                    "reference": self.reference})
        return out

    def var_axes(self):
        return [k for k, a in self.axes.items() if a.type == "var"]

    def axis_values(self, var_values):
        """All axis values: consts from the definition, vars from the workload."""
        values = {k: a.value for k, a in self.axes.items() if a.type == "const"}
        values.update(var_values)
        return values

    def shape_of(self, spec, axis_values):
        return None if spec.shape is None else [int(axis_values[d]) for d in spec.shape]
