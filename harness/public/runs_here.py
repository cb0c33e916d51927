"""What can run here: which entries a device can time, and the fetched Solutions of a definition that it can."""
from harness.data.jsonio import DataError
from harness.public.entries import load_entries
from harness.public.fetch import cache_path, load_cached

TRITON_ON_CPU = ("timing needs a CUDA GPU (on a CPU Triton runs through its interpreter); its correctness: "
                 "gdn-harness eval --solution <its fetched JSON> --device cpu")
ANY_DEVICE = "any"  # public_solutions: keep every fetched entry, whatever runs here


def runnable(entry, device_capability):
    """(can it be timed here, why not or what to expect). device_capability: (major, minor) of the GPU, None on a
    CPU. The facts only speak of sm_90 (the H200): on any other GPU every entry is tried."""
    if device_capability is None:
        if entry.language == "triton":
            return False, TRITON_ON_CPU
        if entry.language == "python" and not entry.needs:
            return True, "pure Python: runs on the CPU, but its times say nothing about a GPU"
        return False, "needs a CUDA GPU"
    if tuple(device_capability) == (9, 0) and entry.runs_on_sm90 == "no":
        return False, f"does not run on sm_90: {entry.sm90_reason}"
    if tuple(device_capability) == (9, 0) and entry.runs_on_sm90 == "unknown":
        return True, f"tried, but it may not run on sm_90: {entry.sm90_reason}"
    return True, ""


def public_solutions(cache_dir, definition, entries=None, device_capability=ANY_DEVICE):
    """(Solutions fetched for `definition`, [(entry, why left out)]), in the facts' order. With a device_capability
    (None for a CPU), entries that cannot run there are left out too."""
    solutions, left_out = [], []
    for entry in entries if entries is not None else load_entries():
        if entry.definition != definition:
            continue
        if device_capability != ANY_DEVICE:
            ok, why = runnable(entry, device_capability)
            if not ok:
                left_out.append((entry, f"not runnable here: {why}"))
                continue
        path = cache_path(cache_dir, entry)
        if not path.is_file():
            left_out.append((entry, f"not fetched: no {path} (run gdn-harness public fetch; offline: --from DIR)"))
            continue
        try:
            solutions.append(load_cached(path, entry))
        except DataError as exc:
            left_out.append((entry, f"refused: {exc}"))
    return solutions, left_out


def device_capability_here():
    """(major, minor) of the visible GPU, None without one."""
    import torch
    return tuple(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None
