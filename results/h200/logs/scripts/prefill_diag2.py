# Prefill diagnostics round 2 (H200): per-launch GPU time and errors vs float64 for launch variants
# (SB: diagonal block size of the Tm solve, fs, prep warps, PREC_T tf32 / tf32x3; chain BV/stages) on
# contest shapes. Directs kernel work; the harness run is what the results cite.
import itertools, json, os, sys, time
import torch
sys.path.insert(0, "submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton")
sys.path.insert(0, ".")
import kernel as K
from reference.gdn_recurrent import recurrent_packed
from tests.test_prefill_kernel import make_inputs   # stand-in style inputs (state N(0,1)); on cuda

def run(inp, cfg, prec=None):
    q = inp[0]
    o = torch.empty(q.shape[0], 8, 128, dtype=torch.bfloat16, device="cuda"); ns = torch.empty_like(inp[3])
    K._launch(K.ALGO_CHUNK, *inp, None, o, ns, cfg=cfg, prec=prec)
    return o, ns

def prof(inp, cfg, prec=None, reps=5):
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    run(inp, cfg, prec); torch.cuda.synchronize()
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            flush.zero_(); run(inp, cfg, prec)
        torch.cuda.synchronize()
    ev = sorted((e for e in p.events() if e.device_type.name == "CUDA" and "gdn" in e.name),
                key=lambda e: e.time_range.start)
    n = len(ev) // reps                        # launches per call (2, or 3 with a split prep)
    calls = [ev[i * n:(i + 1) * n] for i in range(reps)]
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    return {"prep": med([sum(e.time_range.elapsed_us() for e in c if "prep" in e.name) for c in calls]),
            "chain": med([sum(e.time_range.elapsed_us() for e in c if "prep" not in e.name) for c in calls]),
            "span": med([c[-1].time_range.end - c[0].time_range.start for c in calls])}

SHAPES = {"8192/34": [round(i * 8192 / 34) for i in range(35)], "2107/1": [0, 2107],
          "5709/2": [0, 2500, 5709], "959/4": [0, 200, 500, 700, 959]}
variants = []
for prep, pw in itertools.product([1, "split"], [4, 8]):
    variants.append(("prep", dict(prep=prep, prep_warps=pw), None))
for sb in (4, 8):
    variants.append(("prep", dict(prep="split", SB=sb), None))
variants.append(("prep", dict(prep="split", SB=4), dict(PREC_T=K.P_TF32X3)))
variants.append(("prep", dict(fs=1), None))
for bv, st in itertools.product([16, 32], [2, 3]):
    variants.append(("chain", dict(BV=bv, num_stages=st), None))
for bv, st, obv in itertools.product([16, 32], [1, 2], [16, 32]):   # chain carries the state only, 3rd launch outputs
    variants.append(("out", dict(out_split=True, BV=bv, num_stages=st, out_bv=obv), None))
variants.append(("out", dict(out_split=True, BV=32, out_bv=16, prep="split"), None))
variants.append(("out", dict(out_split=True, BV=16, out_bv=16, prep="split"), None))
for c, bv in [(32, 16), (32, 32)]:   # shorter chunks: more chain steps, each shorter
    variants.append(("chain", dict(C=c, BV=bv), None))
    variants.append(("out", dict(C=c, BV=bv, out_split=True, out_bv=32), None))
rows, t0 = [], time.time()
for name, cu in SHAPES.items():
    inp = make_inputs(cu, seed=5)
    ref_o, ref_s = recurrent_packed(*inp, None)
    base = dict(K._pick(cu[-1], len(cu) - 1))
    for kind, change, prec in [("table", {}, None)] + variants:
        if time.time() - t0 > float(os.environ.get("DIAG_S", "200")):
            break
        cfg = dict(base, **change)
        try:
            o, s = run(inp, cfg, prec); torch.cuda.synchronize()
            oe = (o.double() - ref_o).abs(); se = (s.double() - ref_s).abs()
            fails = int(((oe > 1e-2) & (oe / (ref_o.abs() + 1e-8) > 1e-2)).sum())
            t = prof(inp, cfg, prec)
            row = dict(shape=name, kind=kind, change=change, prec=prec, out_err=oe.max().item(), state_err=se.max().item(),
                       fails=fails, prep_us=t["prep"], chain_us=t["chain"], span_us=t["span"])
        except Exception as exc:
            row = dict(shape=name, kind=kind, change=change, prec=prec, error=f"{type(exc).__name__}: {str(exc)[:200]}")
        rows.append(row); print(row, flush=True)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "prefill_diag2.json"), "w"), indent=1, default=str)
