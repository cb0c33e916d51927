"""Where a table's figures come from: GPU, driver, software versions, timer, inputs and dates of its rows."""
import json


def lib_values(df):
    """Every value each environment.libs key takes in df (input_digest left out: per workload, in the traces)."""
    libs = {}
    for text in df.libs.unique():
        for k, v in json.loads(text).items():
            if k != "input_digest":
                libs.setdefault(k, set()).add(v)
    return libs


def timers(df):
    """The timers of the rows that have a latency (a failed pair was not timed)."""
    return sorted(set(df.timer[df.latency_us.notna()]))


def provenance(df):
    libs = lib_values(df)
    return {"hardware": sorted(set(df.hardware)), "timers": timers(df),
            "inputs": sorted(set(df.inputs)),
            "reference_timing": sorted(set(df.reference_timing)),
            "libs": {k: sorted(v) for k, v in sorted(libs.items())},
            "first_trace": str(df.timestamp.min()), "last_trace": str(df.timestamp.max()),
            "sources": sorted(set(df.source))}


def provenance_line(df):
    """One line for CSV columns and plot footers: GPU, software, timer, harness commit, inputs, dates."""
    libs = lib_values(df)
    get = lambda k: "/".join(sorted(map(str, libs.get(k, {"?"}))))  # noqa: E731
    return (f"{'/'.join(sorted(set(df.hardware)))} ({get('sm_count')} SMs), driver {get('driver')}, "
            f"CUDA {get('cuda')}, torch {get('torch')}, Triton {get('triton')}, FlashInfer {get('flashinfer')}, "
            f"harness {get('harness')}; timer {'/'.join(timers(df)) or '-'}; inputs "
            f"{'/'.join(sorted(set(df.inputs)))}; {str(df.timestamp.min())[:10]}..{str(df.timestamp.max())[:10]}")
