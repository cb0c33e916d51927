"""Token-by-token gated delta rule in float64: the plainest statement of the math (GDN.md).

Layouts follow the contest definitions: q/k [T, HK, K], v [T, HV, V], a/b [T, HV],
state k-last [N, HV, V, K]; v-head h reads q/k head h // (HV // HK).
"""
import math

import torch
import torch.nn.functional as F


def gates(A_log, a, dt_bias, b):
    """Per-token decay g in (0, 1] and update strength beta, in float64. a/b: [..., HV]."""
    g = torch.exp(-torch.exp(A_log.double()) * F.softplus(a.double() + dt_bias.double()))
    beta = torch.sigmoid(b.double())
    return g, beta


def resolve_scale(scale, head_size):
    scale = float(scale) if scale is not None else 0.0
    return scale if scale != 0.0 else 1.0 / math.sqrt(head_size)


def recurrent_packed(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """Packed varlen prefill. Returns (output [T, HV, V], new_state [N, HV, V, K]) in float64."""
    T, HK, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    group = HV // HK
    scale = resolve_scale(scale, K)
    g, beta = gates(A_log, a, dt_bias, b)
    qd = q.double().repeat_interleave(group, dim=1)
    kd = k.double().repeat_interleave(group, dim=1)
    vd = v.double()
    bounds = [int(x) for x in cu_seqlens.tolist()]
    N = len(bounds) - 1
    out = torch.zeros(T, HV, V, dtype=torch.float64, device=q.device)
    new_state = torch.zeros(N, HV, V, K, dtype=torch.float64, device=q.device)
    for n in range(N):
        S = (state[n].double().clone() if state is not None
             else torch.zeros(HV, V, K, dtype=torch.float64, device=q.device))
        for t in range(bounds[n], bounds[n + 1]):
            S = g[t, :, None, None] * S                                      # decay
            v_new = beta[t, :, None] * (vd[t] - torch.einsum("hvk,hk->hv", S, kd[t]))
            S = S + v_new[:, :, None] * kd[t][:, None, :]                    # rank-1 update
            out[t] = scale * torch.einsum("hvk,hk->hv", S, qd[t])
        new_state[n] = S
    return out, new_state


def recurrent_decode(q, k, v, state, A_log, a, dt_bias, b, scale):
    """Decode: B independent sequences of one token. q/k [B,1,HK,K], v [B,1,HV,V]."""
    B = q.shape[0]
    cu = torch.arange(B + 1, dtype=torch.int64)
    out, new_state = recurrent_packed(q[:, 0], k[:, 0], v[:, 0], state, A_log, a[:, 0], dt_bias,
                                      b[:, 0], cu, scale)
    return out.unsqueeze(1), new_state
