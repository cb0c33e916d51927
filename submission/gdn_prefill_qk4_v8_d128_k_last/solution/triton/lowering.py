"""Which tensor-core instructions the dots compile to: mma.sync everywhere but where a launch config enables Hopper
wgmma for a build that was validated (docs/kernels/prefill.md, "Lowering")."""
import contextlib
import functools
import os
import re
import warnings

import torch
import triton

# Triton 3.6 miscompiles the one-launch chunk loop when its dots are lowered to Hopper wgmma
# (MMAv3): measured on the H200, wrong outputs (state errors ~2) or an out-of-range shared
# memory access, while the same source lowered to mma.sync was exact to ~1e-3. So every compile of these kernels
# runs with MMAv3/MMAv5 disabled unless its config says otherwise (the env knobs are read at compile time and are
# part of Triton's cache key); they are set only around our own launches and restored afterwards. mma.sync exists
# on sm_80..sm_100, so the same (validated) lowering is used on a B200 too.
MMA_ENV = {"DISABLE_MMA_V3": "1", "DISABLE_MMA_V5": "1"}
# cfg prep_mma_v3 (the prep launch, or the whole fused launch) and chain_mma_v3 (the chain or segment launches)
# leave MMAv3 enabled: Hopper wgmma, for the builds that passed the float64 checks and their GPU tests
# (test_gpu_wgmma_rows). The prep on wgmma: offline sm_90 217 registers and 3008 instructions against 255 and 3712.
# The untransposed chain with 2 stages on wgmma passed, while the same chain with 1 stage at BV32 made an illegal
# memory access (and the chain before the fp16 workspace rows gave wrong outputs), so the keys are used only as
# measured. The fused launch with the key compiles its prep role's dots to wgmma; with the transposed chain its chain
# role's dots have BV = 16 rows, too few for wgmma, so they stay mma.sync, while the untransposed chain role of the
# _wg rows (C = 64 rows) is wgmma too. MMAv5 stays disabled, so a B200 gets the validated mma.sync builds. (Upstream
# reports of the same class: triton-lang/triton #10486 and #11366, several tl.dot on sm_90 wgmma, illegal accesses
# from Triton 3.6 on.)
MMA_V3_ENV = {"DISABLE_MMA_V3": None, "DISABLE_MMA_V5": "1"}


@contextlib.contextmanager
def launch_env(mma_v3):
    """The lowering knobs (MMA_ENV, or MMA_V3_ENV) set around one launch's compile, restored after."""
    saved = {key: os.environ.get(key) for key in MMA_ENV}
    for key, val in (MMA_V3_ENV if mma_v3 else MMA_ENV).items():
        if val is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = val
    try:
        yield
    finally:
        for key, val in saved.items():
            if val is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = val


@functools.lru_cache(maxsize=None)
def has_wgmma(device):
    """Whether the GPU has Hopper's wgmma (sm_90 only: a B200, sm_100, has tcgen05 instead)."""
    return torch.cuda.get_device_capability(device)[0] == 9


# The Gluon chains (chain_gl.py, chain_glt.py) were written against Triton 3.6's Gluon API, an experimental one that
# changes between releases; with an older Triton the rows they serve run chain.py's kernel at the same config (their
# build before the Gluon chains), and the first such call says so.
GLUON_MIN = (3, 6)


@functools.lru_cache(maxsize=None)
def has_gluon_chain(version=triton.__version__):
    """Whether this Triton (`version`) runs the Gluon chains of the sm_90 wgmma rows; warns once when it does not."""
    if tuple(int(x) for x in re.findall(r"\d+", version)[:2]) >= GLUON_MIN:
        return True
    warnings.warn(f"gdn prefill: Triton {version} predates the Gluon API of the sm_90 chain launches "
                  f"({'.'.join(map(str, GLUON_MIN))}): the N >= 5 rows from 3000 tokens run the Triton chain "
                  "(slower; docs/kernels/prefill.md)", stacklevel=2)
    return False
