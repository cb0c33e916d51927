# Prefill diagnostics (H200): per-kernel GPU time (torch.profiler / CUPTI via kineto) of the two launches,
# for launch configs around the table's choice on T=8192 shapes. Directs the next kernel work; not a result.
import itertools, json, math, os, sys, time
import torch
sys.path.insert(0, "submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton")
import kernel as K

dev = "cuda"
def inputs(T, N, seed=0):
    g = torch.Generator(device=dev).manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(T, 4, 128, generator=g, device=dev), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(T, 4, 128, generator=g, device=dev), dim=-1).bfloat16()
    v = torch.randn(T, 8, 128, generator=g, device=dev).bfloat16()
    a = torch.randn(T, 8, generator=g, device=dev).bfloat16(); b = torch.randn(T, 8, generator=g, device=dev).bfloat16()
    A_log = torch.log(torch.rand(8, generator=g, device=dev) * 15 + 1); dt_bias = torch.randn(8, generator=g, device=dev)
    state = torch.randn(N, 8, 128, 128, generator=g, device=dev) * 0.1
    cuts = sorted(torch.randperm(T - 1, generator=torch.Generator().manual_seed(seed))[:N - 1].add(1).tolist())
    cu = torch.tensor([0, *cuts, T], dtype=torch.int64, device=dev)
    return [q, k, v, state, A_log, a, dt_bias, b, cu]

def run(inp, cfg):
    q, k, v, state, A_log, a, dt_bias, b, cu = inp
    o = torch.empty(q.shape[0], 8, 128, dtype=torch.bfloat16, device=dev); ns = torch.empty_like(state)
    K._launch(K.ALGO_CHUNK, q, k, v, state, A_log, a, dt_bias, b, cu, None, o, ns, cfg=cfg)
    return o, ns

def prof(inp, cfg, reps=5):
    flush = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    run(inp, cfg); torch.cuda.synchronize()
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            flush.zero_(); run(inp, cfg)
        torch.cuda.synchronize()
    per = {}
    for e in p.events():
        if e.device_type.name == "CUDA" and "gdn" in e.name:
            per.setdefault(e.name, []).append(e.time_range.elapsed_us())
    return {n: sorted(v)[len(v) // 2] for n, v in per.items()}

rows = []
shapes = [(8192, 20), (8192, 34), (8192, 57), (2107, 1)]
base = dict(C=64, SB=16, num_warps=4, num_stages=2, ws=True, ws_p=True)
cfgs = [dict(base, BV=bv, num_warps=w, num_stages=s) for bv, w, s in itertools.product([16, 32, 64], [4, 8], [1, 2, 3])]
t0 = time.time()
for T, N in shapes:
    inp = inputs(T, N)
    ref_o, ref_s = run(inp, K._pick(T, N)); torch.cuda.synchronize()
    for cfg in [K._pick(T, N)] + cfgs:
        if time.time() - t0 > float(os.environ.get("DIAG_S", "150")):
            break
        try:
            o, s = run(inp, cfg); torch.cuda.synchronize()
            err = max((o.float() - ref_o.float()).abs().max().item(), (s - ref_s).abs().max().item())
            t = prof(inp, cfg)
            row = dict(T=T, N=N, BV=cfg["BV"], warps=cfg["num_warps"], stages=cfg["num_stages"],
                       table=cfg is K._pick(T, N), diff_vs_table=err,
                       prep_us=sum(v for n, v in t.items() if "prep" in n),
                       chain_us=sum(v for n, v in t.items() if "prep" not in n))
        except Exception as exc:
            row = dict(T=T, N=N, BV=cfg["BV"], warps=cfg["num_warps"], stages=cfg["num_stages"], error=str(exc)[:200])
        rows.append(row); print(row, flush=True)
out = os.environ.get("OUT", "/tmp")
json.dump(rows, open(os.path.join(out, "prefill_diag.json"), "w"), indent=1)
