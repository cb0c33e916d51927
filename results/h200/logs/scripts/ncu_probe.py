# ncu probe: run the launch table's config on one contest shape (stand-in cu_seqlens) three times.
import json, os, sys
import torch
sys.path.insert(0, "submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton"); sys.path.insert(0, ".")
import kernel as K
from harness.eval.standin import _cu_seqlens, _rng
from tests.test_prefill_kernel import make_inputs
if os.environ.get("CU"):             # a shape of one's own: CU='[0, 1216]'
    cu = json.loads(os.environ["CU"])
    T, N = cu[-1], len(cu) - 1
else:
    want = os.environ["SHAPE"]      # uuid prefix
    for line in open("workloads/workloads/gdn/gdn_prefill_qk4_v8_d128_k_last.jsonl"):
        w = json.loads(line)["workload"]
        if w["uuid"].startswith(want):
            break
    T, N = w["axes"]["total_seq_len"], w["axes"]["num_seqs"]
    cu = [int(x) for x in _cu_seqlens(_rng(w["uuid"], "cu_seqlens"), T, N)]
inp = make_inputs(cu, seed=11)
o = torch.empty(T, 8, 128, dtype=torch.bfloat16, device="cuda")
ns = torch.empty_like(inp[3])
base = getattr(K, os.environ["ROW"]) if os.environ.get("ROW") else K._pick(T, N)     # ROW: a cfg of the module
cfg = dict(base, **json.loads(os.environ.get("CFG", "{}")))
print(T, N, cfg, flush=True)
for _ in range(3):
    K._launch(K.ALGO_CHUNK, *inp, 0.0, o, ns, cfg=cfg)
torch.cuda.synchronize()
