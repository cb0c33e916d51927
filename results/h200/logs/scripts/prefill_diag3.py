# Prefill diagnostics round 3 (H200): per-launch GPU time of the launch table's config on long contest shapes
# (stand-in style cu_seqlens, evenly split), to see how a two-launch call divides between the prep and the
# chain. torch.profiler kernel records, cold L2 (a 256 MB buffer zeroed before each call), median of 5.
# Run from the repo root on the GPU host, gpu-kit on PYTHONPATH: OUT=<folder> python3 <this file>.
import json, os, sys
import torch
sys.path.insert(0, "submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton")
sys.path.insert(0, ".")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel as K
from profile_calls import profiled_calls
from tests.test_prefill_kernel import make_inputs

SHAPES = {f"{T}/{N}": [round(i * T / N) for i in range(N + 1)]
          for T, N in [(8192, 20), (8192, 34), (8192, 57), (5709, 2), (4124, 15), (3028, 5)]}
rows = []
flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
for name, cu in SHAPES.items():
    inp = make_inputs(cu, seed=5)
    o = torch.empty(cu[-1], 8, 128, dtype=torch.bfloat16, device="cuda")
    ns = torch.empty_like(inp[3])
    cfg = dict(K._pick(cu[-1], len(cu) - 1), **json.loads(os.environ.get("EXTRA", "{}")))   # EXTRA: cfg changes
    call = lambda: K._launch(K.ALGO_CHUNK, *inp, 0.0, o, ns, cfg=cfg)   # noqa: E731
    calls = profiled_calls(call, flush)
    med = lambda xs: sorted(xs)[2]   # noqa: E731
    row = dict(shape=name, cfg={k: v for k, v in cfg.items()}, launches=[e.name for e in calls[0]],
               prep_us=med([sum(e.time_range.elapsed_us() for e in c if "prep" in e.name) for c in calls]),
               chain_us=med([sum(e.time_range.elapsed_us() for e in c if "prep" not in e.name) for c in calls]),
               span_us=med([c[-1].time_range.end - c[0].time_range.start for c in calls]))
    rows.append(row); print(row, flush=True)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), os.environ.get("NAME", "prefill_diag3") + ".json"), "w"),
          indent=1)
