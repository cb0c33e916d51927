"""The launch table: batch size -> launch config; a batch size not listed uses the entry of the largest listed one
below it.

Chosen on an H200 (132 SMs, 60 MiB L2; torch 2.11, Triton 3.6) by `make tune` (every row's candidates timed in
one run with the official timer, cold L2; the figures, and the configs that lost: docs/kernels/decode.md):
 * one-warp CTAs at every B: no cross-warp reduction or barrier, 32 CTAs resident per SM;
 * BV = 4 value rows per CTA below B = 32; the state load evict_first below B = 48 (the state is read once; likely
   its lines then leave L2 before the flush's dirty lines, which would otherwise be written back during the call);
 * vb_fast at B = 8..31 and from B = 48: the V blocks of one head launched together (64 KiB of consecutive state);
 * larger tiles from B = 32 (BV = 16; from B = 48 BV = 8 with vb_fast and no load hint): more bytes in flight per
   warp once the machine is full.

B200 (sm_100, 148 SMs, ~8 TB/s) -- UNMEASURED: the kernel is correct there by construction (plain loads/stores and
reductions, no arch-specific instructions; compiles for sm_100), but this table was tuned on the H200 and may want
changes:
 * small B is latency-bound; BV=4 gives 256 one-warp CTAs at B=1, which still covers 148 SMs;
 * large B: at ~8 TB/s roughly twice the bytes must be in flight per SM (Little's law), so larger tiles per warp
   (BV=8/16) may win back there;
 * the L2 hints' effect depends on the L2 and is untested on Blackwell.
"""
import json
from dataclasses import dataclass
from pathlib import Path

from .shapes import HV, V_DIM

# Tables re-derived on other GPUs by `gdn-harness tune` ({GPU name: {batch size: config}}); a GPU not listed
# there uses LAUNCH_TABLE.
TUNED_FILE = Path(__file__).with_name("tuned_tables.json")


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
    8: DecodeConfig(vb_fast=True),
    32: DecodeConfig(BV=16),
    48: DecodeConfig(BV=8, load_evict="", vb_fast=True),
}
_TABLE, _CACHE = None, {}   # this GPU's table, read at the first call; (grid, config) by batch size


def table_for(device_name):
    """The launch table of a GPU: its tuned one if TUNED_FILE lists it, else LAUNCH_TABLE."""
    try:
        tuned = json.loads(TUNED_FILE.read_text()).get(device_name) if TUNED_FILE.exists() else None
        return {int(b): DecodeConfig(**cfg) for b, cfg in tuned.items()} if tuned else LAUNCH_TABLE
    except (ValueError, TypeError, AttributeError) as exc:   # not JSON, or not {GPU: {B: config fields}}
        raise ValueError(f"{TUNED_FILE}: not a table written by `gdn-harness tune` ({exc})") from None


def entry(table, B):
    """The config of batch size B in `table`: the entry of the largest listed batch size <= B."""
    return table[max((kb for kb in table if kb <= B), default=min(table))]


def _device_name():
    import torch
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def config_for(B):
    """(grid, config) of batch size B: the entry of the largest tabulated batch size <= B in this GPU's table
    (the table is read once, at the first call; results are cached)."""
    global _TABLE
    got = _CACHE.get(B)
    if got is None:
        if _TABLE is None:
            _TABLE = table_for(_device_name())
        cfg = entry(_TABLE, B)
        got = _CACHE[B] = (cfg.grid(B), cfg)
    return got
