# Prefill diagnostics (H200): the timeline of one call, kernel by kernel (start and end relative to the call's first
# kernel, on every stream), for launch configs given as changes to the table's row, on stand-in contest shapes
# (the harness's cu_seqlens of the named workloads). torch.profiler kernel records, cold L2 (a 256 MB buffer zeroed
# before each call), median of 5 per kernel. Run from the repo root on the GPU host, gpu-kit on PYTHONPATH:
# OUT=<folder> NAME=<file stem> CFGS='{"name": {cfg changes}, ...}' UUIDS=<uuid prefixes> python3 <this file>.
# SHAPES='{"name": [cu_seqlens], ...}' adds shapes of one's own; a change with "row": "<a cfg of the kernel module>"
# starts from that config instead of the table's row (e.g. a lone sequence through a two-launch row).
import json, os, statistics, sys
import torch
sys.path.insert(0, "submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton")
sys.path.insert(0, ".")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel as K
from profile_calls import profiled_calls
from harness.eval.standin import _cu_seqlens, _rng
from tests.test_prefill_kernel import make_inputs

rows = [json.loads(line)["workload"] for line in open("workloads/workloads/gdn/gdn_prefill_qk4_v8_d128_k_last.jsonl")]
want = os.environ.get("UUIDS", "").split(",")
cfgs = json.loads(os.environ.get("CFGS", '{"table": {}}'))
flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
shapes = [(w["uuid"][:8], [int(x) for x in _cu_seqlens(_rng(w["uuid"], "cu_seqlens"), w["axes"]["total_seq_len"],
                                                        w["axes"]["num_seqs"])])
          for w in rows if any(w["uuid"].startswith(p) for p in want if p)]
shapes += list(json.loads(os.environ.get("SHAPES", "{}")).items())
out = []
for wname, cu in shapes:
    T, N = cu[-1], len(cu) - 1
    inp = make_inputs(cu, seed=5)
    o = torch.empty(T, 8, 128, dtype=torch.bfloat16, device="cuda")
    ns = torch.empty_like(inp[3])
    for name, change in cfgs.items():
        base = getattr(K, change["row"]) if "row" in change else K._pick(T, N)
        cfg = dict(base, **{key: val for key, val in change.items() if key != "row"})
        call = lambda: K._launch(K.ALGO_CHUNK, *inp, 0.0, o, ns, cfg=cfg)   # noqa: E731
        calls = profiled_calls(call, flush)
        n = len(calls[0])
        kern = []
        for j in range(n):
            kern.append(dict(name=calls[0][j].name,
                             start=statistics.median(c[j].time_range.start - c[0].time_range.start for c in calls),
                             end=statistics.median(c[j].time_range.end - c[0].time_range.start for c in calls)))
        span = statistics.median(max(e.time_range.end for e in c) - c[0].time_range.start for c in calls)
        row = dict(shape=wname, T=T, N=N, maxlen=max(b - a for a, b in zip(cu, cu[1:])), cand=name,
                   change=change, span_us=span, kernels=kern)
        out.append(row)
        print(f"{wname} {T}/{N} max {row['maxlen']} {name:10s} span {span:6.1f} | " +
              " | ".join(f"{k['name'][5:16]} {k['start']:5.1f}-{k['end']:5.1f}" for k in kern), flush=True)
path = os.path.join(os.environ.get("OUT", "/tmp"), os.environ.get("NAME", "prefill_timeline") + ".json")
json.dump(out, open(path, "w"), indent=1)
