"""The launch table: which launch structure and tile shapes run a call of T tokens in N sequences.

Keyed on host-known quantities only (T = total tokens, N = sequences: the longest sequence is not known without a
host sync); rows are scanned in order, the first match wins. A GPU listed in tuned_tables.json (`gdn-harness tune`)
runs the same rows with the configs it timed fastest. Every row was chosen on timings of the 100 contest shapes
on an H200 (132 SMs; the one-launch rows' config and bounds, the two-launch rows' 600-token bound, the
one-sequence segment row from 900 tokens, one CTA an SM, and the BV = 64 row from N = 16, on H100s, also 132 SMs)
and checked against a float64 reference (official rule, 0 failing elements; output and state max abs error ~1e-3
up to T = 8192, N = 57 and a 5258-token sequence). The reason for each row, its figures and the candidates that lost
are in docs/kernels/prefill.md.
  T <= 250: one launch, C = 16 (SB = 8), BV = 8 with 2 warps (and K K^T / Q K^T on fp16, kernel._precisions),
            for one sequence up to 150 tokens, two up to 180 tokens and three or more up to 250 (measured faster
            than the fused launch there: its 16-token steps cost less than the fused launch's prep latency until
            the longest sequence has ~10 chunks); the other calls: fused, below
  N = 1 up to 899 tokens, N = 2 up to 1400, N >= 3 up to 599: fused (BV = 16, or 32 for N = 3; 3 stages with
            N <= 3, else 2; its prep role split into Tm and P tickets)
  N = 1 from 900 and N = 2 from 1401 tokens: the prep, then each sequence cut into 3 segments (3 stages); for one
            sequence up to 2999 tokens, the second segment launch one CTA an SM
  N >= 3 from 600 tokens: two launches (the prep, split into Tm and P CTAs on wgmma, then the chain): the
            transposed BV = 32 with 3 stages (below 3000 tokens), BV = 16 untransposed, 3 stages, longest first
            (N <= 4: few sequences, so more V slices), BV = 32 on wgmma (N = 5..15), or BV = 64 on wgmma (N >= 16)
  on an sm_90 GPU (_wg): the fused rows and the N = 5..15 and N >= 16 two-launch rows run the chain untransposed
            on wgmma, 2 stages; off sm_90 each runs the config it replaced (no_wgmma)
B200 (148 SMs, sm_100a): UNMEASURED. The thresholds, the V splits and the segment count (3: its first launch has 32
CTAs per head and sequence, 256 for one sequence, within the 264 that fit at once on 132 SMs; 148 SMs fit 296) come
from H200 timings only; every row is correct on any GPU (same code, mma.sync path), with two differences: the prep
of every row with one (two launches, segments, fused) is wgmma on the H200 and mma.sync on a B200 (MMAv5
stays off); and the rows built by _wg run their no_wgmma config there (the H200 table's mma.sync configs), since
their untransposed chains were tuned for wgmma only (at BV64 on mma.sync the chain spills). Those mma.sync builds
passed their GPU tests on the H200, and the fp16 builds for sm_100 (chain, fused, segment and prep kernels) compile
offline without spills. The N = 1 segment row's one-CTA-an-SM launch reserves over half of the GPU's shared memory
an SM, whatever its size (a B200's 128 CTAs fit one wave either way; unmeasured there).
"""
import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Optional

# From this many sequences on, CTAs take sequences longest first (chain._longest_first): with several waves of CTAs
# the longest chains then no longer start last, but ranking costs every CTA's prologue time that short calls pay;
# every contest workload with N >= 8 has T >= 3999.
LPT_MIN_N = 8


@dataclass(frozen=True)
class LaunchConfig:
    """One launch configuration. Without ws, one launch: each chain CTA computes Tm and P of its chunks itself.
    With ws, the prep computes Tm and P of every (chunk, head), each in a CTA (or a fused launch's ticket) of its own,
    into fp16 workspaces (with fp16 copies of k and q and the gate vectors), and every dot but K K^T and Q K^T takes
    fp16 operands."""
    C: int                          # tokens per chunk
    BV: int                         # value columns per chain CTA (its state slice is [128, BV])
    SB: int = 16                    # diagonal block size of the Tm inverse (C // SB blocks, merged by doubling)
    num_warps: int = 4
    num_stages: int = 2
    ws: bool = False                # the prep first (its own launch, or a role of the fused one), then the chain
    fused: bool = False             # (ws) the prep and the chain as two roles of one launch
    prep_mma_v3: bool = False       # (ws) the prep's dots on Hopper wgmma (with fused: the whole launch's)
    chain_mma_v3: bool = False      # the chain (or segment) launches' dots on Hopper wgmma
    trans: bool = False             # (ws) the chain holds its state slice transposed, [BV, 128]
    segs: int = 0                   # (ws, not fused) each sequence cut into this many segments (two launches)
    seg_one_per_sm: bool = False    # (segs) the second segment launch's CTAs reserve over half an SM's shared memory
    lpt: Optional[bool] = None      # sequences longest first; None: from LPT_MIN_N sequences
    no_wgmma: Optional["LaunchConfig"] = None   # what a GPU without wgmma runs instead (the rows built by _wg)


@dataclass(frozen=True)
class Row:
    """A row of the table: config takes the calls with T <= max_t and N <= max_n (None: no bound)."""
    max_t: Optional[int]
    max_n: Optional[int]
    config: LaunchConfig


def _wg(cfg, **change):
    """cfg with `change`: an untransposed chain whose dots lower to Hopper wgmma. Off sm_90 (no wgmma; a B200 would
    lower the same source to mma.sync, untuned there) the launcher runs cfg itself (no_wgmma)."""
    return replace(cfg, trans=False, **change, no_wgmma=cfg)


ONE_LAUNCH = LaunchConfig(C=16, BV=8, SB=8, num_warps=2, num_stages=2)
TWO_LAUNCH = LaunchConfig(C=64, BV=16, SB=16, num_warps=4, num_stages=3, ws=True, prep_mma_v3=True)
TWO_LAUNCH_T = replace(TWO_LAUNCH, trans=True)
TWO_LAUNCH_WIDE = replace(TWO_LAUNCH_T, BV=32)
TWO_LAUNCH_LPT = replace(TWO_LAUNCH, lpt=True)         # longest first below LPT_MIN_N too
FUSED = LaunchConfig(C=64, BV=16, SB=16, num_warps=4, num_stages=2, ws=True, fused=True, trans=True,
                     prep_mma_v3=True)
FUSED_3STAGE = replace(FUSED, num_stages=3)
# each sequence in 3 segments walked by two launches after the prep (segments._gdn_seg_kernel); segments take
# sequences in index order (the launcher ranks none for them)
SEG = replace(TWO_LAUNCH_T, segs=3)
# one sequence: the second segment launch's 128 CTAs (grid D / BV x 2 x HV) one to an SM; where two fit an SM they
# do not spread so (docs/kernels/prefill.md)
SEG_ONE = replace(SEG, seg_one_per_sm=True)
# The fused launch compiles its two roles as one kernel, so prep_mma_v3 puts the chain role's dots on wgmma too
# (untransposed: C = 64 rows, enough for wgmma; the transposed chain's BV rows are not).
FUSED_WG_3STAGE = _wg(FUSED_3STAGE)
FUSED_WG_3STAGE_32 = _wg(FUSED_3STAGE, BV=32)
FUSED_WG = _wg(FUSED)
TWO_LAUNCH_WG = _wg(TWO_LAUNCH_WIDE, BV=64, num_stages=2, chain_mma_v3=True)
TWO_LAUNCH_WG32 = _wg(TWO_LAUNCH_T, BV=32, num_stages=2, chain_mma_v3=True)     # N = 5..15

LAUNCH_TABLE = (
    Row(150, 1, ONE_LAUNCH),
    Row(899, 1, FUSED_WG_3STAGE),
    Row(2999, 1, SEG_ONE),
    Row(180, 2, ONE_LAUNCH),
    Row(1400, 2, FUSED_WG_3STAGE),
    Row(250, None, ONE_LAUNCH),
    Row(599, 3, FUSED_WG_3STAGE_32),
    Row(599, None, FUSED_WG),
    Row(2999, 2, SEG),
    Row(2999, None, TWO_LAUNCH_WIDE),
    Row(None, 2, SEG),
    Row(None, 4, TWO_LAUNCH_LPT),
    Row(None, 15, TWO_LAUNCH_WG32),
    Row(None, None, TWO_LAUNCH_WG),
)

# the ablation's own best launch config (same kernel, grid formula and dispatch; of BV in {16, 32} x warps in
# {1, 2, 4} timed on the H200, BV=16 with one warp per CTA was fastest)
RECURRENT = LaunchConfig(C=64, BV=16, num_warps=1, num_stages=1)


# Tables re-derived on other GPUs by `gdn-harness tune` ({GPU name: [[max_t, max_n, config fields], ...]}, the rows
# of LAUNCH_TABLE with the configs that GPU timed fastest); a GPU not listed there uses LAUNCH_TABLE.
TUNED_FILE = Path(__file__).with_name("tuned_tables.json")
_TABLES = {}   # device -> its table, read at its first call


def config_from_json(obj):
    """A LaunchConfig from its fields as `tune` writes them (no_wgmma nested)."""
    if set(obj) - {f.name for f in fields(LaunchConfig)}:
        raise TypeError(f"unknown launch config fields {sorted(set(obj) - {f.name for f in fields(LaunchConfig)})}")
    inner = obj.get("no_wgmma")
    return LaunchConfig(**{**obj, "no_wgmma": config_from_json(inner) if inner is not None else None})


def table_for(device_name):
    """The launch table of a GPU: its tuned one if TUNED_FILE lists it, else LAUNCH_TABLE."""
    try:
        tuned = json.loads(TUNED_FILE.read_text()).get(device_name) if TUNED_FILE.exists() else None
        return tuple(Row(t, n, config_from_json(c)) for t, n, c in tuned) if tuned else LAUNCH_TABLE
    except (ValueError, TypeError, AttributeError) as exc:   # not JSON, or not {GPU: [[max_t, max_n, fields]]}
        raise ValueError(f"{TUNED_FILE}: not a table written by `gdn-harness tune` ({exc})") from None


def table_here(device):
    """The table of the GPU a call runs on (LAUNCH_TABLE off a GPU); read once per device."""
    table = _TABLES.get(device)
    if table is None:
        import torch
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
        table = _TABLES[device] = table_for(name) if name else LAUNCH_TABLE
    return table


def row_of(T, N, table=LAUNCH_TABLE):
    """The first row of `table` that takes T tokens in N sequences; the last row has no bounds, so some row always
    matches."""
    return next(row for row in table
                if (row.max_t is None or T <= row.max_t) and (row.max_n is None or N <= row.max_n))


def pick(T, N, table=LAUNCH_TABLE):
    """The config of row_of(T, N, table)."""
    return row_of(T, N, table).config
