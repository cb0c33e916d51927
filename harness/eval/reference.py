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


class ReferenceFailed(Exception):
    """The reference raised on a workload's inputs. Officially that workload is skipped: no trace for any
    solution (FlashInfer-Bench writes none when the baseline fails)."""


def run_reference(run, definition, inputs):
    try:
        outputs = run(*inputs)
    except Exception as exc:
        raise ReferenceFailed(f"{type(exc).__name__}: {exc}") from exc
    return normalize_outputs(outputs, list(definition.outputs),
                             [torch_dtype(s.dtype) for s in definition.outputs.values()])
