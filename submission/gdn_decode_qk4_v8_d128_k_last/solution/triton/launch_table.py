"""The launch table: batch size -> launch config; a batch size not listed uses the entry of the largest listed one
below it.

Chosen on an H200 (132 SMs, 60 MiB L2; torch 2.11, Triton 3.6) from timings with a cold L2 (the figures, and the
configs that lost: docs/kernels/decode.md):
 * one-warp CTAs of BV = 4 value rows at every B: no cross-warp reduction or barrier, 32 CTAs resident per SM;
 * the state load with evict_first and plain stores: the state is read once (likely its lines then leave L2
   before the flush's dirty lines, which would otherwise be written back during the call);
 * vb_fast from B = 16 on: the V blocks of one head launched together (64 KiB of consecutive state per 32 CTAs).

B200 (sm_100, 148 SMs, ~8 TB/s) -- UNMEASURED: the kernel is correct there by construction (plain loads/stores and
reductions, no arch-specific instructions; compiles for sm_100), but this table was tuned on the H200 and may want
changes:
 * small B is latency-bound; BV=4 gives 256 one-warp CTAs at B=1, which still covers 148 SMs;
 * large B: at ~8 TB/s roughly twice the bytes must be in flight per SM (Little's law), so larger tiles per warp
   (BV=8/16) may win back there;
 * the L2 hints' effect depends on the L2 and is untested on Blackwell.
"""
from dataclasses import dataclass

from .shapes import HV, V_DIM


@dataclass(frozen=True)
class DecodeConfig:
    """One launch config: grid (B * HV, V / BV), or (V / BV, B * HV) with vb_fast."""
    BV: int = 4                         # value rows per CTA
    num_warps: int = 1
    num_stages: int = 1
    load_evict: str = "evict_first"     # eviction policy of the state load ("" for none)
    vb_fast: bool = False               # the V blocks of one head launched together

    def grid(self, B):
        nvb = V_DIM // self.BV
        return (nvb, B * HV) if self.vb_fast else (B * HV, nvb)


LAUNCH_TABLE = {
    1: DecodeConfig(),
    16: DecodeConfig(vb_fast=True),
}
_TABLE_KEYS = sorted(LAUNCH_TABLE)
_CACHE = {}


def config_for(B):
    """(grid, config) of batch size B: the entry of the largest tabulated batch size <= B (cached)."""
    got = _CACHE.get(B)
    if got is None:
        key = _TABLE_KEYS[0]
        for kb in _TABLE_KEYS:
            if kb <= B:
                key = kb
        cfg = LAUNCH_TABLE[key]
        got = _CACHE[B] = (cfg.grid(B), cfg)
    return got
