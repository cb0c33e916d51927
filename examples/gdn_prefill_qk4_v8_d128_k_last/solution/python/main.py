"""Gated DeltaNet prefill, naive PyTorch: a readable starting point, not a fast one.

Definition: gdn_prefill_qk4_v8_d128_k_last (N variable-length sequences packed into T tokens).

Calling convention (destination-passing style): the harness allocates the outputs and calls

    run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state)

with the inputs in definition order followed by the outputs. Write every element of `output`
and `new_state`; the return value is ignored. Never write into the inputs.

    q, k       [T, 4, 128]       bf16   query / key, 4 heads, tokens of all sequences packed
    v          [T, 8, 128]       bf16   value, 8 heads
    state      [N, 8, 128, 128]  fp32   initial state per (sequence, v-head), k-last: [.., V, K]
    A_log      [8]               fp32   per v-head decay parameter
    a          [T, 8]            bf16   per-token decay input
    dt_bias    [8]               fp32   per v-head bias added to `a`
    b          [T, 8]            bf16   per-token update-gate input
    cu_seqlens [N + 1]           int64  sequence i is tokens cu_seqlens[i] .. cu_seqlens[i+1]-1
    scale      scalar            fp32   output scale (0 or None: 1 / sqrt(128))
    output     [T, 8, 128]       bf16   (written here)
    new_state  [N, 8, 128, 128]  fp32   state after each sequence's last token (k-last)

The math, per sequence, per v-head h, for its tokens t in order (S is that head's [V, K] state,
starting from state[seq, h]):

    g_t    = exp(-exp(A_log[h]) * softplus(a_t[h] + dt_bias[h]))   decay gate, in (0, 1]
    beta_t = sigmoid(b_t[h])                                       update strength, in (0, 1)
    S'     = g_t * S                                               forget a little
    v_new  = beta_t * (v_t - S' k_t)                               delta rule: correct the error
    S      = S' + v_new k_t^T                                      rank-1 write
    o_t    = scale * S q_t

What a contestant would replace: everything in `run`. This version walks the tokens one by one
with several whole-state PyTorch ops each (thousands of small launches for a long prompt, and
a host sync on cu_seqlens). Fast kernels use the chunkwise form of the same recurrence (blocks
of 16-64 tokens turned into small matrix products for tensor cores, the state kept on chip
between chunks, gates computed in the kernel, one launch for all sequences): see GDN.md.
"""
import math

import torch
import torch.nn.functional as F

NUM_QK_HEADS = 4   # q and k heads
NUM_V_HEADS = 8    # v heads (and state / output heads)
HEAD_DIM = 128     # K = V = 128


def gates(A_log, a, dt_bias, b):
    """The two per-(token, v-head) scalars, in fp32: decay g and update strength beta.

    exp(A_log) > 0 and softplus(.) > 0, so the exponent is negative and 0 < g <= 1.
    """
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    beta = torch.sigmoid(b.float())
    return g, beta


def expand_to_v_heads(x):
    """GQA-style head mapping ("GVA": more v heads than q/k heads).

    There are 8 v heads but only 4 q/k heads: v-head h reads q/k head h // 2, so v-heads 0 and 1
    share q/k head 0, v-heads 2 and 3 share q/k head 1, and so on. repeat_interleave along the
    head dimension builds exactly that: [.., 4, K] -> [.., 8, K] with rows 0,0,1,1,2,2,3,3.
    (A real kernel just indexes head h // 2 instead of materialising the copy.)
    """
    return x.repeat_interleave(NUM_V_HEADS // NUM_QK_HEADS, dim=-2)


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state):
    num_seqs = cu_seqlens.shape[0] - 1
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(HEAD_DIM)

    # Everything that does not depend on the state is computed for all T tokens up front, in fp32.
    q = expand_to_v_heads(q.float())                # [T, 8, K]
    k = expand_to_v_heads(k.float())                # [T, 8, K]
    v = v.float()                                   # [T, 8, V]
    g, beta = gates(A_log, a, dt_bias, b)           # [T, 8] each

    bounds = cu_seqlens.tolist()                    # a host sync: fine here, costly in a fast kernel
    for seq in range(num_seqs):
        start, end = bounds[seq], bounds[seq + 1]

        # k-last layout: S[h] is a [V, K] matrix with K (the key index) contiguous, so "state times
        # a key vector" is a reduction over the LAST axis: (S k)[v] = sum_k S[v, k] k[k].
        # `state` is optional in the definition; no state means a zero state.
        if state is None:
            S = torch.zeros(NUM_V_HEADS, HEAD_DIM, HEAD_DIM, dtype=torch.float32, device=q.device)
        else:
            S = state[seq].float()                  # [8, V, K]; rebound below, never written

        # The recurrence is sequential in t; each step is vectorised over the 8 v-heads.
        for t in range(start, end):
            S = g[t, :, None, None] * S                                         # S' = g_t S
            v_new = beta[t, :, None] * (v[t] - torch.einsum("hvk,hk->hv", S, k[t]))  # beta (v - S' k)
            S = S + v_new[:, :, None] * k[t, :, None, :]                        # S' + v_new k^T
            output[t] = (scale * torch.einsum("hvk,hk->hv", S, q[t])).to(output.dtype)  # scale S q_t

        # The state after the sequence's last token. An empty sequence keeps its initial state
        # (the definition's reference writes zeros there; no contest workload has one).
        new_state[seq] = S
