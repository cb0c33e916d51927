"""Offline (no GPU): every row of the prefill launch table builds for the H200 (sm_90) and the contest's B200
(sm_100), launch by launch, exactly as the launcher would compile it there, and the B200 build of every launch is
mma.sync (no wgmma, no tcgen05). The launcher runs on a pretend GPU: a call of a (T, N) that the row takes is
planned as on the device (the row's config, or its no_wgmma one off sm_90), and each launch's jit function,
arguments and lowering knobs are recorded where it would compile, then compiled here for the target with Triton's
own compiler (tools/offline_build.py's plan_call and compile_launch). Compiles run in a fresh process: the
interpreter mode of the CPU tests must not leak into them. The tool itself is checked at the end."""
import json
import subprocess
import sys

import pytest

from tests.offline_compile import ROOT, compile_offline, offline_env
from tests.solutions import load_solution

pytest.importorskip("triton")

COMPILE = r"""
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
from offline_build import compile_launch, plan_call     # the planning and compiling, shared with the tool
D = "gdn_prefill_qk4_v8_d128_k_last"
pk, lt = load_solution(D), load_solution(D, "launch_table")
arch = int(sys.argv[2])


def call_of(row_index):
    # a (T, N) the table gives to this row (the first matching row wins)
    for n in (1, 2, 3, 4, 5, 8, 16, 20, 25, 57):
        for t in (4, 16, 24, 48, 100, 150, 300, 1000, 1400, 2000, 2999, 4000, 8192):
            if t >= n and lt.pick(t, n) is lt.LAUNCH_TABLE[row_index].config:
                return t, n
    raise AssertionError(f"no probed (T, N) reaches row {row_index}: {lt.LAUNCH_TABLE[row_index]}")


built, rows = {}, []
for i, row in enumerate(lt.LAUNCH_TABLE):
    t, n = call_of(i)
    launches = []
    for fn, kw, knobs in plan_call(pk, t, n, arch):
        # every argument the launcher passes is one the kernel takes (Triton refuses others at the launch)
        unknown = set(kw) - set(fn.arg_names) - {"num_warps", "num_stages", "launch_pdl"}
        assert not unknown, (i, fn.__name__, sorted(unknown))
        early = kw.get("launch_pdl", False)
        cst = {p.name: kw[p.name] for p in fn.params if p.is_constexpr}
        key = (fn.__name__, json.dumps(cst, sort_keys=True), kw["num_warps"], kw["num_stages"], early,
               json.dumps(knobs))
        if key not in built:
            ptx = compile_launch(fn, kw, knobs, arch).asm["ptx"]
            built[key] = {"kernel": fn.__name__, "wgmma": "wgmma" in ptx, "mma_sync": "mma.sync" in ptx,
                          "tcgen05": "tcgen05" in ptx, "early": early,
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
    # the chains of N >= 5 from 3000 tokens are Gluon kernels on sm_90 (the BV = 64 one, N >= 16, transposed); no
    # other row and no other GPU runs one
    gluon = {(r["N"], launch["kernel"]) for r in rows for launch in r["launches"] if "_gl" in launch["kernel"]}
    if arch == 90:
        want = {(r["N"], "_gdn_chain_glt" if r["N"] >= 16 else "_gdn_chain_gl") for r in rows
                if r["T"] >= 3000 and r["N"] >= 5}
        assert want and gluon == want, (gluon, want)
    else:
        assert not gluon, gluon


def _tool(*args, tmp_path):
    return subprocess.run([sys.executable, str(ROOT / "tools/offline_build.py"), *map(str, args)],
                          env=offline_env(tmp_path), capture_output=True, text=True, timeout=900)


def test_offline_build_tool_reports_each_launch_and_its_loop(tmp_path):
    # a T = 8192 call of 34 sequences: the prep, then the chain; on sm_90 the chain is the BV = 64 Gluon kernel with
    # its dots on wgmma inside its chunk loop, on sm_100 the Triton chain on mma.sync; neither spills to the stack
    for arch, chain, mma in ((90, "_gdn_chain_glt", "HGMMA"), (100, "_gdn_prefill_kernel", "HMMA")):
        run = _tool(8192, 34, "--arch", arch, "--keep", tmp_path / str(arch), tmp_path=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        launches = [json.loads(line) for line in run.stdout.splitlines()]
        assert [x["kernel"] for x in launches] == ["_gdn_prep_kernel", chain], launches
        assert launches[1]["loop"] > 0 and launches[1].get(mma, 0) > 0 and launches[1]["stack"] == 0, launches
        assert "HGMMA" not in launches[1] or arch == 90, launches
        # the prep's copies and gate vectors are stored before its solve, so on sm_90 it fits 4 CTAs an SM (at most
        # 128 registers a thread: 65536 / (4 x 128 threads)); stored after it, it took 167
        assert arch != 90 or launches[0]["registers"] <= 128, launches
        assert (tmp_path / str(arch) / f"1.{chain}.sm{arch}.ptx").is_file()
    bad = _tool(5, 6, tmp_path=tmp_path)
    assert bad.returncode != 0 and "need 1 <= N <= T" in bad.stderr
