"""Chunkwise (WY / UT transform) gated delta rule in float64: the form tensor-core kernels use (GDN.md).

Same signature and returns as `gdn_recurrent.recurrent_packed`. Per sequence, per chunk of C tokens,
with H0 the state at the chunk start as [K, V] (the definitions store it k-last, S[v, k] = H0^T):

    G_r     = sum_{j<=r} log g_j                 (in-chunk cumulative log gate; gamma = exp(G))
    A[r,s]  = beta_r exp(G_r - G_s) (k_r . k_s)  for s < r, else 0
    W       = (I + A)^-1 diag(beta gamma) K       U = (I + A)^-1 diag(beta) V
    X       = U - W H0                            (the chunk's effective "new values")
    O       = scale (diag(gamma) Q H0 + ((Q K^T) o M) X),   M[r,s] = exp(G_r - G_s) for s <= r
    H_C     = gamma_C H0 + (diag(exp(G_C - G)) K)^T X

Why it equals the recurrence: unrolling H_t = g_t (I - beta_t k_t k_t^T) H_{t-1} + beta_t k_t v_t^T
inside a chunk gives H_r = gamma_r H0 + sum_{s<=r} exp(G_r - G_s) k_s x_s^T, and the delta rule's
x_r = beta_r (v_r - H'^T k_r) is then a unit lower triangular system in the x's: (I + A) X = ...
"""
import torch
import torch.nn.functional as F

from reference.gdn_recurrent import gates, resolve_scale


def _chunk(q, k, v, log_g, beta, H0, scale):
    """One chunk for all heads at once. q/k [H,C,K], v [H,C,V], log_g/beta [H,C], H0 [H,K,V]."""
    C = q.shape[1]
    G = torch.cumsum(log_g, dim=1)                                        # [H, C]
    diff = G[:, :, None] - G[:, None, :]                                  # G_r - G_s
    # Mask BEFORE exp: above the diagonal G_r - G_s > 0 can overflow, and those entries are unused.
    # Ratios exp(G_r - G_s) <= 1 stay finite where 1/gamma_s would not (GDN.md).
    incl = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()    # s <= r
    M = torch.exp(torch.where(incl, diff, torch.full_like(diff, -torch.inf)))
    strict = M * (1 - torch.eye(C, dtype=M.dtype, device=M.device))      # s < r
    A = beta[:, :, None] * strict * (k @ k.transpose(1, 2))
    I_plus_A = A + torch.eye(C, dtype=A.dtype, device=A.device)
    gamma = torch.exp(G)
    # T = (I + A)^-1 applied by a triangular solve (never form the inverse); both right-hand
    # sides in one solve: W = T diag(beta gamma) K, U = T diag(beta) V.
    rhs = torch.cat([(beta * gamma)[:, :, None] * k, beta[:, :, None] * v], dim=2)
    WU = torch.linalg.solve_triangular(I_plus_A, rhs, upper=False, unitriangular=True)
    W, U = WU[:, :, :k.shape[2]], WU[:, :, k.shape[2]:]
    X = U - W @ H0                                                        # [H, C, V]
    O = scale * (gamma[:, :, None] * (q @ H0) + ((q @ k.transpose(1, 2)) * M) @ X)
    decay_to_end = torch.exp(G[:, -1:] - G)                               # exp(G_C - G_s) <= 1
    H_end = gamma[:, -1, None, None] * H0 + (decay_to_end[:, :, None] * k).transpose(1, 2) @ X
    return O, H_end


def chunked_packed(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, chunk=16):
    """Packed varlen prefill, chunk by chunk. Returns (output [T, HV, V], new_state [N, HV, V, K]) in float64."""
    T, HK, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    scale = resolve_scale(scale, K)
    _, beta = gates(A_log, a, dt_bias, b)                                 # [T, HV]
    # log g directly (not log(exp(.))): a gate that underflows to 0 would give log 0 = -inf, NaN below.
    log_g = -torch.exp(A_log.double()) * F.softplus(a.double() + dt_bias.double())
    # GVA: v-head h reads q/k head h // (HV // HK); heads first so each chunk is a batch of matmuls.
    qd = q.double().repeat_interleave(HV // HK, dim=1).transpose(0, 1)    # [HV, T, K]
    kd = k.double().repeat_interleave(HV // HK, dim=1).transpose(0, 1)
    vd = v.double().transpose(0, 1)                                       # [HV, T, V]
    lg, bt = log_g.transpose(0, 1), beta.transpose(0, 1)                  # [HV, T]
    bounds = [int(x) for x in cu_seqlens.tolist()]
    N = len(bounds) - 1
    out = torch.zeros(HV, T, V, dtype=torch.float64, device=q.device)
    new_state = torch.zeros(N, HV, V, K, dtype=torch.float64, device=q.device)
    for n in range(N):
        # k-last state S[v, k] -> H [K, V] for the formulas.
        H = (state[n].double().transpose(1, 2) if state is not None
             else torch.zeros(HV, K, V, dtype=torch.float64, device=q.device))
        for s in range(bounds[n], bounds[n + 1], chunk):
            e = min(s + chunk, bounds[n + 1])                             # last chunk may be short
            O, H = _chunk(qd[:, s:e], kd[:, s:e], vd[:, s:e], lg[:, s:e], bt[:, s:e], H, scale)
            out[:, s:e] = O
        new_state[n] = H.transpose(1, 2)                                  # back to k-last [V, K]
    return out.transpose(0, 1).contiguous(), new_state
