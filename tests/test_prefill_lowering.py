"""Offline (no GPU): our one-launch prefill kernel must be lowered to mma.sync, not Hopper wgmma or
Blackwell tcgen05, because Triton 3.6 miscompiles its chunk loop with wgmma (wrong states or an illegal
memory access on the H200). The launcher sets DISABLE_MMA_V3/V5 around its launches; this checks that
those knobs are what keeps wgmma out, for the one-launch config of the launch table, on sm_90 and sm_100;
the fused launch, the transposed chain (the table's chain for N >= 3 at 600-2999 tokens) and the segment launches
must build for both targets too.
Those rows build as the table runs them (the rows with a workspace: fp16 workspaces and dot operands).
The prep of every row that has one (two launches, segments, fused) is the exception: MMAv3 stays on for it
(wgmma on sm_90 only, mma.sync on sm_100); so is every launch of the _wg rows (untransposed chains).
Every launch but the one-launch and fused ones builds as a call of two or three launches runs it (PDL).
Compiles run in a fresh process: the interpreter mode the CPU tests use must not leak into them."""
import pytest

from tests.offline_compile import compile_offline

pytest.importorskip("triton")

COMPILE = r"""
DEFINITION = "gdn_prefill_qk4_v8_d128_k_last"
pk, lt = load_solution(DEFINITION), load_solution(DEFINITION, "launch_table")
low, chunk = load_solution(DEFINITION, "lowering"), load_solution(DEFINITION, "chunk")
arch, knobs = int(sys.argv[2]), sys.argv[3]
for key, val in {"1": low.MMA_ENV, "3": low.MMA_V3_ENV}.get(knobs, {}).items():   # as launch_env sets them
    if val is not None:
        os.environ[key] = val
# the _wg rows (untransposed chains on wgmma): "wg" the N >= 16 row's chain, "fused-wgrow" the fused N <= 2 row
wg = sys.argv[4] in ("wg", "fused-wgrow")
fused = sys.argv[4] in ("fused", "fused-wg", "fused-wgrow")   # fused-wg: with MMAv3 on, as the rows run it
trans = sys.argv[4] == "trans"      # the N >= 3, 600-2999-token row's chain launch (ALGO_CHUNK_WS_T, BV = 32)
prep = sys.argv[4] == "prep"        # the two-launch rows' first launch (cfg prep_mma_v3)
phase = {"seg1": 1, "seg2": 2}.get(sys.argv[4], 0)   # the segment rows' 2nd or 3rd launch (cfg segs)
cfg = (lt.FUSED_WG_3STAGE if wg else lt.FUSED) if fused else lt.TWO_LAUNCH_WIDE if trans or prep else \
    lt.SEG if phase else lt.TWO_LAUNCH_WG if wg else lt.ONE_LAUNCH
if sys.argv[4] == "one-4warps":     # the one-launch kernel with a warpgroup's 4 warps (the shipped row has 2)
    cfg = lt.replace(cfg, BV=16, num_warps=4)
assert not (fused or trans or phase or wg) or cfg.trans != wg    # transposed chains but in the _wg rows
kern = pk._gdn_fused_kernel if fused else pk._gdn_prep_kernel if prep else pk._gdn_seg_kernel if phase else \
    pk._gdn_prefill_kernel
types = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "s_ptr": "*fp32", "alog_ptr": "*fp32",
         "a_ptr": "*bf16", "dtb_ptr": "*fp32", "b_ptr": "*bf16", "cu_ptr": "*i64", "o_ptr": "*bf16",
         "ns_ptr": "*fp32", "ws_ptr": "*fp32", "wp_ptr": "*bf16", "scale": "fp32", "N": "i32",
         "sync_ptr": "*i32", "perm_ptr": "*i32", "NPREP": "i32", "NVB": "i32", "e_ptr": "*fp32", "x_ptr": "*fp32",
         "h_ptr": "*fp32"}
C, SB = cfg.C, min(cfg.SB, cfg.C)
chain_algo = pk.ALGO_CHUNK_WS if wg else pk.ALGO_CHUNK_WS_T
cst = dict(NP2=2, LPT=False, CHAIN_ALGO=chain_algo,
           ALGO=chain_algo if trans or phase or wg else pk.ALGO_CHUNK,
           MMA_V3=cfg.prep_mma_v3,
           C=C, BV=cfg.BV, SB=SB, PHASE=phase, NSEG=cfg.segs, PREC_C=chunk.P_TF32X3,
           HAS_STATE=True, INTERP=False, RANK=False, PDL=not fused and (trans or prep or wg or bool(phase)),
           WS_P=True,   # the prep of a Triton chain (TWO_LAUNCH_WIDE) writes P tiles
           **pk._precisions(True, one_launch=not cfg.ws))   # the dots' operand precisions as _launch on a GPU
if cfg.ws:     # fp16 workspaces
    types.update(ws_ptr="*fp16", wp_ptr="*fp16")
names = kern.arg_names
cst = {k: v for k, v in cst.items() if k in names}
assert set(names) <= set(types) | set(cst), sorted(set(names) - set(types) - set(cst))
sig = {name: "constexpr" if name in cst else types[name] for name in names}
attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(names) if name.endswith("_ptr")}
ck = triton.compile(ASTSource(kern, sig, constexprs=cst, attrs=attrs),
                    target=GPUTarget("cuda", arch, 32),
                    options=dict(num_warps=4 if prep else cfg.num_warps, num_stages=1 if prep else cfg.num_stages))
ptx = ck.asm["ptx"]
print(json.dumps({"wgmma": "wgmma" in ptx, "mma_sync": "mma.sync" in ptx, "tcgen05": "tcgen05.mma" in ptx,
                  "atomics": "atom." in ptx}))
"""


def _lowering(arch, knobs, tmp_path, kernel="one"):
    """knobs: True = the launcher's MMA_ENV, False = none, "3" = MMA_V3_ENV (cfg prep_mma_v3)."""
    return compile_offline(COMPILE, [arch, {True: "1", False: "0"}.get(knobs, knobs), kernel], tmp_path)


@pytest.mark.parametrize("arch", [90, 100])
def test_one_launch_config_is_lowered_to_mma_sync(arch, tmp_path):
    assert _lowering(arch, True, tmp_path) == {"wgmma": False, "mma_sync": True, "tcgen05": False,
                                               "atomics": False}


@pytest.mark.parametrize("arch", [90, 100])
def test_fused_variant_compiles_with_mma_sync_and_atomics(arch, tmp_path):
    # the launch table's fused entry (its roles synchronise through atomics) builds for both targets
    assert _lowering(arch, True, tmp_path, "fused") == {"wgmma": False, "mma_sync": True, "tcgen05": False,
                                                        "atomics": True}


@pytest.mark.parametrize("arch", [90, 100])
def test_transposed_chain_compiles_with_mma_sync(arch, tmp_path):
    # the table's transposed chain launch (cfg "trans", the N >= 16 row) builds for both targets
    assert _lowering(arch, True, tmp_path, "trans") == {"wgmma": False, "mma_sync": True, "tcgen05": False,
                                                        "atomics": False}


def test_without_the_knobs_hopper_gets_wgmma(tmp_path):
    # Why the launcher sets them: left alone, Triton picks wgmma for this kernel on sm_90 with 4 warps (a tuned
    # table may give the row 4); the shipped row's 2 warps are no warpgroup, so mma.sync either way.
    assert _lowering(90, False, tmp_path, "one-4warps")["wgmma"]
    assert not _lowering(90, False, tmp_path)["wgmma"]


@pytest.mark.parametrize("arch", [90, 100])
@pytest.mark.parametrize("phase", ["seg1", "seg2"])
def test_segment_launches_compile_with_mma_sync(arch, phase, tmp_path):
    # the segment rows' two walking launches (cfg segs, the launcher's MMA_ENV) build for both targets
    assert _lowering(arch, True, tmp_path, phase) == {"wgmma": False, "mma_sync": True, "tcgen05": False,
                                                      "atomics": False}


@pytest.mark.parametrize("arch", [90, 100])
def test_split_prep_gets_wgmma_on_hopper_only(arch, tmp_path):
    # the two-launch rows' prep runs with MMAv3 on (cfg "prep_mma_v3"): wgmma on sm_90; MMAv5 stays off,
    # so a B200 gets the mma.sync build
    assert _lowering(arch, "3", tmp_path, "prep") == {"wgmma": arch == 90, "mma_sync": arch != 90, "tcgen05": False,
                                                    "atomics": False}


@pytest.mark.parametrize("arch", [90, 100])
def test_fused_prep_role_on_mma_v3_keeps_the_chain_role_on_mma_sync(arch, tmp_path):
    # "prep_mma_v3" on the fused launch (rows up to 1400 tokens): on sm_90 the prep role's dots become wgmma while the
    # chain role's (BV = 16 rows) stay mma.sync; a B200 gets mma.sync only
    assert _lowering(arch, "3", tmp_path, "fused-wg") == {"wgmma": arch == 90, "mma_sync": True, "tcgen05": False,
                                                          "atomics": True}


@pytest.mark.parametrize("arch", [90, 100])
@pytest.mark.parametrize("kind", ["wg", "fused-wgrow"])
def test_wg_rows_get_wgmma_on_hopper_only(arch, kind, tmp_path):
    # the _wg rows compile with MMAv3 on (cfg "chain_mma_v3", or "prep_mma_v3" for the fused launch):
    # their untransposed chains' dots become wgmma on sm_90; a B200 runs their "no_wgmma" configs, but these build
    # there too, as mma.sync (MMAv5 stays off)
    got = _lowering(arch, "3", tmp_path, kind)
    assert got["wgmma"] == (arch == 90) and not got["tcgen05"] and got["atomics"] == (kind == "fused-wgrow")
    assert arch == 90 or got["mma_sync"]


def test_gluon_chains_only_with_the_triton_they_were_written_for():
    # chain_gl.py / chain_glt.py use Triton 3.6's experimental Gluon API: an older Triton runs chain.py's kernel on
    # those rows instead, and the first such call says so
    from tests.solutions import load_solution
    low = load_solution("gdn_prefill_qk4_v8_d128_k_last", "lowering")
    assert all(low.has_gluon_chain(v) for v in ("3.6.0", "3.7.1+git8f3c2a1", "4.0.0"))
    with pytest.warns(UserWarning, match=r"Triton 3\.5\.1 predates the Gluon API .* run the Triton chain"):
        assert not low.has_gluon_chain("3.5.1")
