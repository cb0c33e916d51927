"""`--state-copy`: a device copy of a workload's state into new_state, timed per workload as the solutions are (same
timer, settings and cold L2), in the harness's own process. It moves the bytes a kernel that reads the state and
writes a new one must move at least (for decode nearly all of them), so a solution's latency over it says how far
that solution is from the memory bound. No official counterpart: the figure goes to the harness extras only."""
import statistics
import time

from harness.data.dataset import append_jsonl, extras_path
from harness.data.jsonio import DataError, read_jsonl
from harness.eval import environment
from harness.eval.child import official_timing
from harness.eval.inputs import allocate_outputs, materialize
from harness.eval.payloads import blobs_and_provenance
from harness.eval.timing import measure, timer_label
from harness.eval.traces import now

RECORD = "state_copy"


def copies_state(definition):
    """Whether the definition reads a `state` and writes a `new_state` of the same shape and dtype."""
    state, new = definition.inputs.get("state"), definition.outputs.get("new_state")
    return state is not None and new is not None and (state.shape, state.dtype) == (new.shape, new.dtype)


def require_state(definition):
    """Refuse --state-copy for a definition without a state to copy."""
    if not copies_state(definition):
        raise DataError("--state-copy", f"{definition.name} reads no `state` input or writes no `new_state` output "
                        "of its shape and dtype: there is nothing to copy")


def _copy(state, new_state):
    new_state.copy_(state)


def copy_latency_ms(definition, workload, inputs, timing, device, timer="auto"):
    """Latency (ms) of new_state.copy_(state) on the workload's inputs (definition order, any device): the mean over
    trials of each trial's median, as a solution's."""
    state = inputs[list(definition.inputs).index("state")].to(device)
    new_state = allocate_outputs(definition, workload, device)[list(definition.outputs).index("new_state")]
    return statistics.mean(measure(_copy, [state, new_state], timing, device, timer).median_ms
                           for _ in range(timing.trials))


def recorded(out_dir, definition, opts):
    """Workloads whose state copy out_dir's extras already hold for this GPU model, timer and settings."""
    path = extras_path(out_dir, definition.name)
    if not path.exists():
        return set()
    want = (environment.hardware(opts.device), timer_label(opts.device, opts.timer), _settings(definition, opts))
    return {e["workload"] for _, e in read_jsonl(path, allow_partial_tail=True) if e.get("record") == RECORD
            and (e["hardware"], e["timer"], e["timing"]) == want}


def _settings(definition, opts):
    t = opts.timing or official_timing(definition.name)
    return f"{t.warmup}/{t.iters}/{t.trials}"


def time_and_record(dataset, definition, workload, opts, given=None):
    """Time the workload's state copy and append its extras line; returns the latency in ms. `given`: (provenance,
    trial inputs) where the caller holds them, else they are made from the workload's blobs (trial 0)."""
    start = time.monotonic()
    if given is None:
        blobs, provenance = blobs_and_provenance(dataset, definition, workload, opts)
        inputs = materialize(definition, workload, blobs, opts.device, 0, opts.seed)
    else:
        provenance, inputs = given
    ms = copy_latency_ms(definition, workload, inputs, opts.timing or official_timing(definition.name), opts.device,
                         opts.timer)
    append_jsonl(extras_path(opts.out_dir, definition.name), {
        "record": RECORD, "solution": None, "workload": workload.uuid, "latency_ms": ms,
        "timing": _settings(definition, opts), "timer": timer_label(opts.device, opts.timer),
        "inputs": provenance["inputs"], "input_digest": provenance["digest"],
        "hardware": environment.hardware(opts.device), "seconds": round(time.monotonic() - start, 3),
        "timestamp": now()})
    return ms
