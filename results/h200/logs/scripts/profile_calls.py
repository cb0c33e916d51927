# Shared by the prefill diagnostics (prefill_diag3.py, prefill_timeline.py, prefill_prep_diag.py): the kernel records
# of `reps` calls of one solution, each call after zeroing a flush buffer (cold L2), from torch.profiler; returns one
# list of kernel events per call, in start order (every call launches the same kernels).
import torch
from torch.profiler import profile, ProfilerActivity


def profiled_calls(call, flush, reps=5):
    call(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            flush.zero_(); call()
        torch.cuda.synchronize()
    ev = sorted((e for e in p.events() if e.device_type.name == "CUDA" and "gdn" in e.name),
                key=lambda e: e.time_range.start)
    n = len(ev) // reps
    return [ev[i * n:(i + 1) * n] for i in range(reps)]
