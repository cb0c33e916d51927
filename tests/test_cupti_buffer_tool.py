"""tools/cupti_buffer.py (a GPU diagnostic): its inputs are a valid call of the prefill reference, checked on the CPU
against the definition's shapes."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import cupti_buffer  # noqa: E402


def test_one_sequence_is_a_valid_reference_call():
    reference = cupti_buffer.load_reference(cupti_buffer.Dataset().definition(cupti_buffer.PREFILL))
    out, new_state = reference(*cupti_buffer.one_sequence(7, device="cpu"))
    assert tuple(out.shape) == (7, 8, 128) and tuple(new_state.shape) == (1, 8, 128, 128)
    assert out.isfinite().all() and new_state.isfinite().all()
