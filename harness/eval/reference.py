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


RAISED = "the reference failed on its inputs"
BAD_RESULT = "the reference's result does not fit the definition's outputs"
BAD_BLOB = "its baseline could not be built from its blobs"


class ReferenceFailed(Exception):
    """A workload's baseline could not be built: the reference raised on its inputs (RAISED), its result does
    not normalise to the outputs (BAD_RESULT), or a blob cannot give its inputs (BAD_BLOB). Officially that
    workload is skipped: no trace for any solution (FlashInfer-Bench's run_all logs the failure and goes on)."""

    def __init__(self, detail, why=RAISED):
        super().__init__(detail)
        self.why = why


def run_reference(run, definition, inputs):
    try:
        outputs = run(*inputs)
    except Exception as exc:
        raise ReferenceFailed(f"{type(exc).__name__}: {exc}") from exc
    try:
        return normalize_outputs(outputs, list(definition.outputs),
                                 [torch_dtype(s.dtype) for s in definition.outputs.values()])
    except Exception as exc:
        raise ReferenceFailed(f"{type(exc).__name__}: {exc}", BAD_RESULT) from exc
