"""Offline (no GPU): every row of the prefill launch table builds for the H200 (sm_90) and the contest's B200
(sm_100), launch by launch, exactly as the launcher would compile it there, and the B200 build of every launch is
mma.sync (no wgmma, no tcgen05). The launcher runs on a pretend GPU: a call of a (T, N) that the row takes is
planned as on the device (the row's config, or its no_wgmma one off sm_90), and each launch's jit function,
arguments and lowering knobs are recorded where it would compile, then compiled here for the target with Triton's
own compiler. Compiles run in a fresh process: the interpreter mode of the CPU tests must not leak into them."""
import pytest

from tests.offline_compile import compile_offline
from tests.solutions import load_solution

pytest.importorskip("triton")

COMPILE = r"""
import torch
from triton.experimental.gluon._runtime import GluonASTSource
D = "gdn_prefill_qk4_v8_d128_k_last"
pk, lt = load_solution(D), load_solution(D, "launch_table")
arch = int(sys.argv[2])
KNOBS = ("DISABLE_MMA_V3", "DISABLE_MMA_V5")


class OnGpu(torch.Tensor):    # q on a pretend GPU: the launcher plans the call as on the device
    @property
    def is_cuda(self):
        return True


class Planned(Exception):
    pass


recorded = []


class Bound:                  # what warmup returns: indexable by the grid, a launcher that is never called
    def __getitem__(self, grid):
        return lambda *a, **k: None


def warmup(self, *args, grid, **kw):
    recorded.append((self, kw, {k: os.environ.get(k) for k in KNOBS}))
    return Bound()


def planned(*a, **k):         # the stream lookup right after every launch is bound: the plan is complete
    raise Planned


triton.runtime.jit.JITFunction.warmup = warmup
torch.cuda.current_stream = planned
pk.has_wgmma = lambda device: arch == 90
pk.has_pdl = lambda device: True


def call_of(row_index):
    # a (T, N) the table gives to this row (the first matching row wins)
    for n in (1, 2, 3, 4, 5, 8, 16, 20, 25, 57):
        for t in (4, 16, 24, 48, 100, 150, 300, 1000, 1400, 2000, 2999, 4000, 8192):
            if t >= n and lt.pick(t, n) is lt.LAUNCH_TABLE[row_index].config:
                return t, n
    raise AssertionError(f"no probed (T, N) reaches row {row_index}: {lt.LAUNCH_TABLE[row_index]}")


def tensors(t, n):
    bf, f32 = torch.bfloat16, torch.float32
    cu = torch.linspace(0, t, n + 1).round().to(torch.int64)
    q = torch.zeros(t, 4, 128, dtype=bf).as_subclass(OnGpu)
    return (q, torch.zeros(t, 4, 128, dtype=bf), torch.zeros(t, 8, 128, dtype=bf), torch.zeros(n, 8, 128, 128),
            torch.zeros(8), torch.zeros(t, 8, dtype=bf), torch.zeros(8), torch.zeros(t, 8, dtype=bf), cu, 0.0,
            torch.zeros(t, 8, 128, dtype=bf), torch.zeros(n, 8, 128, 128, dtype=f32))


TYPES = {torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.float32: "*fp32", torch.int32: "*i32",
         torch.int64: "*i64"}
built, rows = {}, []
for i, row in enumerate(lt.LAUNCH_TABLE):
    t, n = call_of(i)
    recorded.clear()
    try:
        pk.kernel(*tensors(t, n))
    except Planned:
        pass
    launches = []
    for fn, kw, knobs in recorded:
        # every argument the launcher passes is one the kernel takes (Triton refuses others at the launch)
        unknown = set(kw) - set(fn.arg_names) - {"num_warps", "num_stages", "launch_pdl"}
        assert not unknown, (i, fn.__name__, sorted(unknown))
        cst = {p.name: kw[p.name] for p in fn.params if p.is_constexpr}
        sig = {p.name: "constexpr" if p.is_constexpr
               else TYPES[kw[p.name].dtype] if isinstance(kw[p.name], torch.Tensor)
               else "fp32" if isinstance(kw[p.name], float) else "i32" for p in fn.params}
        opts = dict(num_warps=kw["num_warps"], num_stages=kw["num_stages"], launch_pdl=kw.get("launch_pdl", False))
        key = (fn.__name__, json.dumps(cst, sort_keys=True), json.dumps(opts, sort_keys=True), json.dumps(knobs))
        if key not in built:
            for k in KNOBS:
                os.environ.pop(k, None)
            os.environ.update({k: v for k, v in knobs.items() if v is not None})
            attrs = {(j,): [["tt.divisibility", 16]] for j, p in enumerate(fn.params) if p.name.endswith("_ptr")}
            src = GluonASTSource if fn.is_gluon() else ASTSource     # the Gluon chain (chain_gl.py)
            ptx = triton.compile(src(fn, sig, constexprs=cst, attrs=attrs), target=GPUTarget("cuda", arch, 32),
                                 options=opts).asm["ptx"]
            built[key] = {"kernel": fn.__name__, "wgmma": "wgmma" in ptx, "mma_sync": "mma.sync" in ptx,
                          "tcgen05": "tcgen05" in ptx, "early": opts["launch_pdl"],
                          "waits": "griddepcontrol.wait" in ptx, "lets_next": "griddepcontrol.launch_dependents" in ptx}
        launches.append(built[key])
    rows.append({"row": i, "T": t, "N": n, "launches": launches})
print(json.dumps(rows))
"""


@pytest.mark.parametrize("arch", [90, 100])
def test_every_prefill_row_builds_launch_by_launch(arch, tmp_path):
    rows = compile_offline(COMPILE, [arch], tmp_path, timeout=1200)
    assert len(rows) == len(load_solution("gdn_prefill_qk4_v8_d128_k_last", "launch_table").LAUNCH_TABLE)
    for r in rows:
        assert r["launches"], r                        # every row plans at least one launch
        for launch in r["launches"]:
            assert launch["mma_sync"] or launch["wgmma"], (r, launch)   # every launch has its dots on tensor cores
            assert not launch["tcgen05"], (r, launch)
            if arch != 90:
                assert not launch["wgmma"], (r, launch)               # a B200 build is mma.sync throughout
        # programmatic dependent launch: the first launch of a call is never launched early (it reads what earlier
        # kernels of the stream wrote, without waiting), every later one is and waits for the one before it, and
        # each one followed by another lets it start
        steps = r["launches"]
        assert not steps[0]["early"] and not steps[0]["waits"], r
        for before, after in zip(steps, steps[1:]):
            assert before["lets_next"] and after["early"] and after["waits"], r
        assert not steps[-1]["lets_next"], r
    if arch == 90:   # the _wg rows and the prep of the two-launch rows put dots on wgmma on the H200
        assert any(launch["wgmma"] for r in rows for launch in r["launches"])
    # the chains of N = 5..15 and N >= 25 from 3000 tokens are Gluon kernels on sm_90 (the BV = 64 one, N >= 25,
    # transposed); no other row and no other GPU runs one
    gluon = {(r["N"], launch["kernel"]) for r in rows for launch in r["launches"] if "_gl" in launch["kernel"]}
    if arch == 90:
        want = {(r["N"], "_gdn_chain_glt" if r["N"] >= 25 else "_gdn_chain_gl") for r in rows
                if r["T"] >= 3000 and (5 <= r["N"] <= 15 or r["N"] >= 25)}
        assert want and gluon == want, (gluon, want)
    else:
        assert not gluon, gluon
