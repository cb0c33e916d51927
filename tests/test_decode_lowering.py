"""Offline (no GPU): every row of the decode launch table compiles for the H200 (sm_90) and the contest's B200
(sm_100), and stays plain loads, stores and reductions there (no tensor-core MMA, no atomics, no arch-specific
async copies), so the B200 path of each row is the same code as the H200's. Compiles run in a fresh process: the
interpreter mode the CPU tests use must not leak into them."""
import pytest

from tests.offline_compile import compile_offline

pytest.importorskip("triton")

COMPILE = r"""
DEFINITION = "gdn_decode_qk4_v8_d128_k_last"
su, lt, sh = (load_solution(DEFINITION, m) for m in ("state_update", "launch_table", "shapes"))
arch, out = int(sys.argv[2]), {}
kern = su._gdn_decode_kernel
types = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "s_ptr": "*fp32", "A_log_ptr": "*fp32",
         "a_ptr": "*bf16", "dt_bias_ptr": "*fp32", "b_ptr": "*bf16", "o_ptr": "*bf16", "ns_ptr": "*fp32",
         "scale": "fp32"}
for b, cfg in sorted(lt.LAUNCH_TABLE.items()):
    cst = dict(NUM_HV=sh.HV, GROUP=sh.HV // sh.HK, K=sh.K_DIM, V=sh.V_DIM, BV=cfg.BV, HAS_STATE=True,
               LOAD_EVICT=cfg.load_evict, VB_FAST=cfg.vb_fast)
    sig = {n: "constexpr" if n in cst else types[n] for n in kern.arg_names}
    ck = triton.compile(ASTSource(kern, sig, constexprs=cst), target=GPUTarget("cuda", arch, 32),
                        options=dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages))
    ptx = ck.asm["ptx"]
    out[b] = {"mma": any(m in ptx for m in ("mma.sync", "wgmma", "tcgen05")), "atomics": "atom." in ptx,
              "async_copy": any(m in ptx for m in ("cp.async", "cp.async.bulk")), "loads": ptx.count("ld.global"),
              "stores": ptx.count("st.global")}
print(json.dumps(out))
"""


@pytest.mark.parametrize("arch", [90, 100])
def test_every_decode_row_compiles_to_plain_loads_and_stores(arch, tmp_path):
    rows = compile_offline(COMPILE, [arch], tmp_path)
    assert rows   # every row of the table, compiled
    for b, r in rows.items():
        assert not r["mma"] and not r["atomics"] and not r["async_copy"], (b, r)
        assert r["loads"] > 0 and r["stores"] > 0, (b, r)
