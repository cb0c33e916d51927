# Prefill diagnostics (H200): the two-launch rows' first launch (the prep) with parts of its work taken out of a copy of
# the kernel module (text substitutions below; those copies compute wrong results: timing only), kernel by kernel
# (torch.profiler, cold L2, median of 5: scripts/profile_calls.py), on stand-in contest shapes. Run from the repo root
# on the GPU host: OUT=<folder> NAME=<file stem> [KERNEL=<a kernel.py>] [UUIDS=<uuid prefixes>] python3 <this file>.
# Variants: p_only / tm_only (the other role's CTAs do nothing but find their slot), empty (both), tm_nosolve (K K^T
# stored instead of the solved Tm), no_kq_copy (no fp16 copies of k and q), no_gates (no gate block).
import importlib.util, json, os, statistics, sys
import torch
sys.path.insert(0, "."); sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_calls import profiled_calls
from harness.eval.standin import _cu_seqlens, _rng
from tests.test_prefill_kernel import make_inputs
src = open(os.environ.get("KERNEL", "submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton/kernel.py")).read()
TM_CALL = "N, True, False, C, SB, LOG2NB, SCAN, NP2,\n                       PREC_QK, PREC_T, NHV, NHK, DK)"
P_CALL = "N, False, True, C, SB, LOG2NB, SCAN, NP2,\n                       PREC_QK, PREC_T, NHV, NHK, DK)"
OFF = "N, False, False, C, SB, LOG2NB, SCAN, NP2,\n                       PREC_QK, PREC_T, NHV, NHK, DK)"
SOLVE = "            Tm = _chunk_tm(k, G, beta, C, SB, LOG2NB, PREC_QK, PREC_T)\n            tl.store(ws_ptr + _ws_off"
VARIANTS = {
    "base": [],
    "p_only": [(TM_CALL, OFF)],
    "tm_only": [(P_CALL, OFF)],
    "empty": [(TM_CALL, OFF), (P_CALL, OFF)],
    "tm_nosolve": [(SOLVE, "            Tm = _mm(k, tl.trans(k), PREC_QK)\n            tl.store(ws_ptr + _ws_off")],
    "no_kq_copy": [("if h % (NHV // NHK) == 0:   # one copy per q/k head", "if h < 0:"),
                   ("                if h % (NHV // NHK) == 0:\n", "                if h < 0:\n")],
    "no_gates": [("                tl.store(gp + r, gam)\n                tl.store(gp + C + r, beta)\n"
                  "                tl.store(gp + 2 * C + r, dec)\n", "")],
}
rows = [json.loads(l)["workload"] for l in open("workloads/workloads/gdn/gdn_prefill_qk4_v8_d128_k_last.jsonl")]
want = os.environ.get("UUIDS", "5d3fc66a,06f21bb1").split(",")
flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
out = []
for name, subs in VARIANTS.items():
    s = src
    for a, b in subs:
        assert s.count(a) >= 1, (name, a[:50])
        s = s.replace(a, b)
    path = f"/tmp/kd_{name}.py"
    open(path, "w").write(s)
    spec = importlib.util.spec_from_file_location(f"kd_{name}", path)
    K = importlib.util.module_from_spec(spec); spec.loader.exec_module(K)
    for w in rows:
        if w["uuid"][:8] not in want:
            continue
        axes = w["axes"]
        cu = [int(x) for x in _cu_seqlens(_rng(w["uuid"], "cu_seqlens"), axes["total_seq_len"], axes["num_seqs"])]
        inp = make_inputs(cu, seed=5)
        o = torch.empty(cu[-1], 8, 128, dtype=torch.bfloat16, device="cuda")
        ns = torch.empty_like(inp[3])
        cfg = K._pick(cu[-1], len(cu) - 1)
        try:
            calls = profiled_calls(lambda: K._launch(K.ALGO_CHUNK, *inp, 0.0, o, ns, cfg=cfg), flush)
            d = [statistics.median(c[j].time_range.end - c[j].time_range.start for c in calls)
                 for j in range(len(calls[0]))]
        except Exception as e:
            d = [str(e)[:80]]
        out.append(dict(variant=name, uuid=w["uuid"][:8], kernels_us=d))
        print(f"{name:12s} {w['uuid'][:8]} " + " ".join(f"{x:7.1f}" if isinstance(x, float) else x for x in d),
              flush=True)
path = os.path.join(os.environ.get("OUT", "/tmp"), os.environ.get("NAME", "prefill_prep_diag") + ".json")
json.dump(out, open(path, "w"), indent=1)
