"""Programmatic dependent launch (PDL, sm_90 and later) between the launches of one call: a launch after the first
starts while the one before it drains, runs what reads only the call's inputs, and waits (gdc_wait) before its
first read of what that launch wrote; each launch with a successor lets it start once all its CTAs have begun
(gdc_launch_dependents). So the launch gap and the tail of the prep are no longer on the call's span. The first
launch of a call is never dependent: it reads inputs that earlier kernels of the stream wrote and never waits."""
try:        # Triton >= 3.4; kernel.HAS_PDL keeps older versions on plain launches
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
    HAS_PDL = True
except ImportError:
    gdc_launch_dependents = gdc_wait = None
    HAS_PDL = False
