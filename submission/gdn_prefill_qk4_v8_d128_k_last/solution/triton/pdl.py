"""Programmatic dependent launch (PDL, sm_90 and later) between the launches of one call: a launch after the first
starts before the one before it has ended, runs what reads only the call's inputs, and waits (gdc_wait) before its
first read of what that launch wrote; each launch with a successor lets it start (gdc_launch_dependents): the prep
once each of its CTAs has stored its slot, the first segment launch as its CTAs begin (they all fit on the GPU at
once). Measured on an H100 (docs/kernels/prefill.md): the launch gap leaves the span of every T = 8192 call (~1 %);
letting the chain start as the prep's CTAs begin made it 6 % slower (chain CTAs shared SMs with the prep's last
wave). The first launch of a call is never dependent: it reads inputs that earlier kernels of the stream wrote."""
import functools
import warnings

import torch
import triton

try:        # Triton >= 3.4; with an older one the calls launch without PDL and say so (pdl_usable)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
    HAS_PDL = True
except ImportError:
    gdc_launch_dependents = gdc_wait = None
    HAS_PDL = False


@functools.lru_cache(maxsize=None)
def pdl_usable(major, has_gdc=HAS_PDL):
    """Whether a call's launches can be dependent on a GPU of compute capability `major`: the GPU has programmatic
    dependent launch (griddepcontrol: sm_90 and later, the B200 too) and Triton its gdc_* (`has_gdc`, >= 3.4). A GPU
    with it under an older Triton is told once."""
    if major < 9:
        return False
    if not has_gdc:
        warnings.warn(f"gdn prefill: Triton {triton.__version__} has no gdc_wait / gdc_launch_dependents (3.4 and "
                      "later): the calls of two or three launches run without programmatic dependent launch (~1 % "
                      "slower at T = 8192; docs/kernels/prefill.md)", stacklevel=2)
    return has_gdc


@functools.lru_cache(maxsize=None)
def has_pdl(device):
    """pdl_usable for the GPU `device`."""
    return pdl_usable(torch.cuda.get_device_capability(device)[0])
