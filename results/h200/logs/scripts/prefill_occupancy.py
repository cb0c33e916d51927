# Prefill occupancy probe (H200): registers, spills, shared memory and resident CTAs per SM (the driver's
# cuOccupancyMaxActiveBlocksPerMultiprocessor) of every kernel a launch-table row compiles, on long contest shapes.
# Run from the repo root on the GPU host: OUT=<folder> python3 <this file>; EXTRA='{"SB": 8}' changes every cfg.
import ctypes, json, os, sys
import torch
sys.path.insert(0, "submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton")
sys.path.insert(0, ".")
import kernel as K
from tests.test_prefill_kernel import make_inputs

cuda = ctypes.CDLL("libcuda.so.1")
seen = []
for fn in (K._gdn_prep_kernel, K._gdn_prefill_kernel, K._gdn_seg_kernel, K._gdn_fused_kernel):
    def warmup(*a, _fn=fn, _orig=type(fn).warmup, **kw):
        ck = _orig(_fn, *a, **kw)
        seen.append((_fn.__name__, kw.get("num_warps", 4), ck))
        return ck
    fn.warmup = warmup
rows = []
for T, N in [(8192, 20), (8192, 57), (5709, 2), (4124, 15), (3028, 5)]:
    cu = [round(i * T / N) for i in range(N + 1)]
    inp = make_inputs(cu, seed=5)
    o = torch.empty(T, 8, 128, dtype=torch.bfloat16, device="cuda")
    ns = torch.empty_like(inp[3])
    cfg = dict(K._pick(T, N), **json.loads(os.environ.get("EXTRA", "{}")))
    seen.clear()
    K._launch(K.ALGO_CHUNK, *inp, 0.0, o, ns, cfg=cfg)
    torch.cuda.synchronize()
    for name, warps, ck in seen:
        ck._init_handles()
        nb = ctypes.c_int(0)
        rc = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(nb), ctypes.c_void_p(ck.function),
                                                               warps * 32, ctypes.c_size_t(ck.metadata.shared))
        row = dict(shape=f"{T}/{N}", kernel=name, warps=warps, regs=ck.n_regs, spills=ck.n_spills,
                   shared=ck.metadata.shared, ctas_per_sm=nb.value if rc == 0 else f"cuda error {rc}")
        rows.append(row)
        print(row, flush=True)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), os.environ.get("NAME", "prefill_occupancy") + ".json"),
                     "w"), indent=1)
