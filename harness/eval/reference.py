"""The definition's reference: its `reference` source executed as-is, `run(*inputs)`."""
import types

from harness.eval.correctness import normalize_outputs
from harness.eval.inputs import torch_dtype


def load_reference(definition):
    module = types.ModuleType(f"reference_{definition.name}")
    code = compile(definition.reference, f"<reference of {definition.name}>", "exec")
    exec(code, module.__dict__)
    if not callable(module.__dict__.get("run")):
        raise ValueError(f"definition {definition.name}: reference source defines no run()")
    return module.run


def run_reference(run, definition, inputs):
    return normalize_outputs(run(*inputs), list(definition.outputs),
                             [torch_dtype(s.dtype) for s in definition.outputs.values()])
