"""Gated DeltaNet decode (qk4 / v8 / d128, k-last fp32 state): one fused Triton launch.

Definition: gdn_decode_qk4_v8_d128_k_last. Destination-passing style:

    kernel(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state) -> None

q/k [B,1,4,128] bf16, v [B,1,8,128] bf16, state [B,8,128,128] fp32 (k-last: [B, HV, V, K]),
A_log/dt_bias [8] fp32, a/b [B,1,8] bf16; output [B,1,8,128] bf16 and new_state
[B,8,128,128] fp32 are preallocated by the caller and fully written here. Inputs are never
written; new_state must not alias state (each CTA reads its rows before writing them, but the
kernel gives no guarantee for overlapping buffers).

Per (batch b, v-head h, block of BV value rows), v-head h reading q/k head h // 2:
    g     = exp(-exp(A_log[h]) * softplus(a + dt_bias[h]))
    beta  = sigmoid(b)
    Sk    = S k,   Sq = S q              (S: the old state rows, [BV, K], read once)
    v_new = beta * (v - g * Sk)
    o     = scale * (g * Sq + v_new * (k . q))       (= scale * S_new q, single pass)
    S_new = g * S + v_new k^T                        (written once)
The state is the only large traffic (1 MiB read + 1 MiB written per batch element), so the
kernel is a streaming pass over it: 16-byte vector loads/stores along K (K is the contiguous
dimension; Triton vectorises because K is a constexpr multiple of 4 and the base pointers are
16-byte aligned), the reductions over K stay inside a warp, and V is split across CTAs so
that small batches still put enough CTAs on the machine.

Modules (siblings of this file, imported relatively: the builder imports this file as a package module):
    shapes.py        head counts and head size
    launch_table.py  the launch configs by batch size
    state_update.py  the Triton kernel
"""
import math

import torch

from .launch_table import DecodeConfig, config_for
from .shapes import HK, HV, K_DIM, V_DIM
from .state_update import _gdn_decode_kernel

_DEFAULT_SCALE = 1.0 / math.sqrt(K_DIM)


def _resolve_scale(scale):
    if scale is None:
        return _DEFAULT_SCALE
    if isinstance(scale, torch.Tensor):
        # Documented slow path: .item() is a host sync. The official harness passes a Python
        # float (the definition's scalar input), so it never gets here.
        scale = scale.item()
    scale = float(scale)
    return scale if scale != 0.0 else _DEFAULT_SCALE


def launch(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state, cfg=DecodeConfig()):
    """Launch with an explicit configuration (the tests run every config this way)."""
    _run(cfg.grid(q.shape[0]), cfg, (q, k, v, state, A_log, a, dt_bias, b), scale, (output, new_state))


def _run(grid, cfg, inputs, scale, outputs):
    """One launch of config cfg on grid; inputs and outputs in the definition's order."""
    q, k, v, state, A_log, a, dt_bias, b = inputs
    output, new_state = outputs
    has_state = state is not None
    _gdn_decode_kernel[grid](
        q, k, v, state if has_state else new_state, A_log, a, dt_bias, b, output, new_state,
        _resolve_scale(scale),
        NUM_HV=HV, GROUP=HV // HK, K=K_DIM, V=V_DIM, BV=cfg.BV, HAS_STATE=has_state,
        LOAD_EVICT=cfg.load_evict, VB_FAST=cfg.vb_fast, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )


def kernel(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    """Official entry point (DPS). One kernel launch; no allocation, no sync, nothing else.

    Expects the definition's contiguous tensors (the harness allocates them so)."""
    _run(*config_for(q.shape[0]), (q, k, v, state, A_log, a, dt_bias, b), scale, (output, new_state))
