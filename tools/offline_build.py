"""Diagnostic (no GPU needed): the launches our prefill launcher plans for one call of T tokens in N sequences (even
lengths), compiled with Triton's own compiler for sm_90 (the H200 / H100) or sm_100 (the contest's B200), each
exactly as the launcher would compile it there; per launch its kernel, registers, stack, shared memory, and the
instruction mix of its longest loop (the chunk loop). This is how docs/kernels/prefill.md's offline figures are
made, and tests/test_prefill_rows_compile.py plans and compiles every launch-table row with the same functions.

    python tools/offline_build.py 8192 34 [--arch 90] [--solution DIR] [--keep DIR]

--solution: a copy of submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton to build instead (a variant);
--keep: also write each launch's cubin, PTX and TTGIR there. Run it without TRITON_INTERPRET (the interpreter
compiles nothing)."""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

REPO = Path(__file__).resolve().parent.parent
PREFILL_DIR = REPO / "submission/gdn_prefill_qk4_v8_d128_k_last/solution/triton"
KNOBS = ("DISABLE_MMA_V3", "DISABLE_MMA_V5")       # the lowering knobs the launcher sets per launch (lowering.py)
TYPES = {torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.float32: "*fp32", torch.int32: "*i32",
         torch.int64: "*i64"}
NV_BIN = Path(triton.__file__).parent / "backends/nvidia/bin"


class _OnGpu(torch.Tensor):   # q on a pretend GPU: the launcher plans the call as on the device
    @property
    def is_cuda(self):
        return True


class _Planned(Exception):
    pass


def _call_inputs(t, n):
    """The kernel's arguments for T tokens in N sequences of even lengths, on the CPU (only shapes and dtypes
    matter)."""
    bf, f32 = torch.bfloat16, torch.float32
    cu = torch.linspace(0, t, n + 1).round().to(torch.int64)
    q = torch.zeros(t, 4, 128, dtype=bf).as_subclass(_OnGpu)
    return (q, torch.zeros(t, 4, 128, dtype=bf), torch.zeros(t, 8, 128, dtype=bf), torch.zeros(n, 8, 128, 128),
            torch.zeros(8), torch.zeros(t, 8, dtype=bf), torch.zeros(8), torch.zeros(t, 8, dtype=bf), cu, 0.0,
            torch.zeros(t, 8, 128, dtype=bf), torch.zeros(n, 8, 128, 128, dtype=f32))


def plan_call(pk, t, n, arch):
    """The launches pk (the prefill's kernel module) plans for a call of T tokens in N sequences on a GPU of
    `arch`: [(jit function, its launch keywords, the lowering knobs set at its launch)]. Each launch's warmup is
    recorded instead of run, and the stream lookup right after the last one ends the plan (nothing is launched).
    Patches Triton and torch for good: run it in a process of its own."""
    recorded = []

    class Bound:              # what warmup returns: indexable by the grid, a launcher that is never called
        def __getitem__(self, grid):
            return lambda *a, **k: None

    def warmup(self, *args, grid, **kw):
        recorded.append((self, kw, {k: os.environ.get(k) for k in KNOBS}))
        return Bound()

    def planned(*a, **k):
        raise _Planned

    triton.runtime.jit.JITFunction.warmup = warmup
    torch.cuda.current_stream = planned
    pk.has_wgmma = lambda device: arch == 90
    pk.has_pdl = lambda device: True
    try:
        pk.kernel(*_call_inputs(t, n))
    except _Planned:
        pass
    if not recorded:       # the stream lookup came before the launches' warmups: nothing to compile, say so
        raise RuntimeError(f"the launcher planned no launch for {t}/{n}: plan_call ends at its stream lookup, "
                           "which must follow the last launch's warmup")
    return recorded


def compile_launch(fn, kw, knobs, arch):
    """One planned launch compiled for sm_`arch` with its lowering knobs (Triton's CompiledKernel)."""
    from triton.experimental.gluon._runtime import GluonASTSource
    cst = {p.name: kw[p.name] for p in fn.params if p.is_constexpr}
    sig = {p.name: "constexpr" if p.is_constexpr
           else TYPES[kw[p.name].dtype] if isinstance(kw[p.name], torch.Tensor)
           else "fp32" if isinstance(kw[p.name], float) else "i32" for p in fn.params}
    opts = dict(num_warps=kw["num_warps"], num_stages=kw["num_stages"], launch_pdl=kw.get("launch_pdl", False))
    for k in KNOBS:
        os.environ.pop(k, None)
    os.environ.update({k: v for k, v in knobs.items() if v is not None})
    attrs = {(j,): [["tt.divisibility", 16]] for j, p in enumerate(fn.params) if p.name.endswith("_ptr")}
    src = GluonASTSource if fn.is_gluon() else ASTSource     # the Gluon chains (chain_gl.py, chain_glt.py)
    return triton.compile(src(fn, sig, constexprs=cst, attrs=attrs), target=GPUTarget("cuda", arch, 32),
                          options=opts)


def loop_mix(cubin_path):
    """The longest backward branch's body in the SASS (the chunk loop): its instruction count and a few kinds."""
    sass = subprocess.run([str(NV_BIN / "nvdisasm"), "-c", str(cubin_path)], capture_output=True, text=True,
                          check=True).stdout
    ins, labels, pending = [], {}, []
    for line in sass.splitlines():
        label = re.match(r"^\s*(\.L_x_\d+):", line)
        if label:
            pending.append(label.group(1))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            addr = int(m.group(1), 16)
            labels.update({p: addr for p in pending})
            pending = []
            ins.append((addr, m.group(2).strip()))
    loops = [(labels[m.group(1)], addr) for addr, text in ins
             if (m := re.search(r"BRA.*?(\.L_x_\d+)", text)) and labels.get(m.group(1), addr) < addr]
    if not loops:
        return {"loop": 0}
    lo, hi = max(loops, key=lambda span: span[1] - span[0])
    ops = collections.Counter(text.split()[1 if text.startswith("@") else 0].split(".")[0]
                              for addr, text in ins if lo <= addr <= hi)
    kinds = ("HGMMA", "HMMA", "BAR", "LDG", "STG", "LDGSTS", "LDS", "STS", "LDSM", "STSM", "SHFL")
    return {"loop": sum(ops.values()), **{k: ops[k] for k in kinds if ops[k]}}


def resources(cubin_path, kernel):
    """Registers and stack from cuobjdump, shared memory (static and dynamic) from the compiled kernel."""
    out = subprocess.run([str(NV_BIN / "cuobjdump"), "-res-usage", str(cubin_path)], capture_output=True,
                         text=True, check=True).stdout
    reg, stack = re.search(r"REG:(\d+) STACK:(\d+)", out).groups()
    return {"registers": int(reg), "stack": int(stack), "shared": kernel.metadata.shared}


def report(pk, args, keep):
    """One JSON line per launch of the call: its shape, resources and loop mix; its files written to keep."""
    for i, (fn, kw, knobs) in enumerate(plan_call(pk, args.T, args.N, args.arch)):
        kernel = compile_launch(fn, kw, knobs, args.arch)
        stem = keep / f"{i}.{fn.__name__}.sm{args.arch}"
        cubin = Path(f"{stem}.cubin")
        cubin.write_bytes(kernel.asm["cubin"])
        if args.keep:
            Path(f"{stem}.ptx").write_text(kernel.asm["ptx"])
            Path(f"{stem}.ttgir").write_text(kernel.asm["ttgir"])
        shape = {k: kw[k] for k in ("C", "BV", "SB", "num_warps", "num_stages", "launch_pdl") if k in kw}
        row = {"launch": i, "kernel": fn.__name__, **shape, **resources(cubin, kernel), **loop_mix(cubin)}
        print(json.dumps(row))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("T", type=int)
    ap.add_argument("N", type=int)
    ap.add_argument("--arch", type=int, choices=(90, 100), default=90)
    ap.add_argument("--solution", type=Path, default=PREFILL_DIR, help="the prefill's solution/triton folder")
    ap.add_argument("--keep", type=Path, help="write each launch's cubin, PTX and TTGIR here")
    args = ap.parse_args()
    if os.environ.get("TRITON_INTERPRET"):
        sys.exit("unset TRITON_INTERPRET: the interpreter compiles nothing")
    if not 1 <= args.N <= args.T:
        sys.exit(f"need 1 <= N <= T (got T = {args.T}, N = {args.N})")
    if not (args.solution / "kernel.py").is_file():
        sys.exit(f"{args.solution}: no kernel.py (name the prefill's solution/triton folder)")
    sys.path.insert(0, str(REPO))
    from harness.build.folder_import import import_from_folder
    pk = import_from_folder(args.solution, "kernel", "_offline_prefill")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:     # the cubins the disassembler reads, unless kept
        report(pk, args, args.keep or Path(scratch))


if __name__ == "__main__":
    main()
