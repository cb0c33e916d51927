"""Gated DeltaNet decode, naive PyTorch: a readable starting point, not a fast one.

Definition: gdn_decode_qk4_v8_d128_k_last (one new token per sequence, B sequences).

Calling convention (destination-passing style): the harness allocates the outputs and calls

    run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state)

with the inputs in definition order followed by the outputs. Write every element of `output`
and `new_state`; the return value is ignored. Never write into the inputs.

    q, k      [B, 1, 4, 128]    bf16   query / key, 4 heads
    v         [B, 1, 8, 128]    bf16   value, 8 heads
    state     [B, 8, 128, 128]  fp32   recurrent state per (sequence, v-head), k-last: [.., V, K]
    A_log     [8]               fp32   per v-head decay parameter
    a         [B, 1, 8]         bf16   per-token decay input
    dt_bias   [8]               fp32   per v-head bias added to `a`
    b         [B, 1, 8]         bf16   per-token update-gate input
    scale     scalar            fp32   output scale (0 or None: 1 / sqrt(128))
    output    [B, 1, 8, 128]    bf16   (written here)
    new_state [B, 8, 128, 128]  fp32   (written here, k-last like `state`)

The math, per sequence and per v-head h (S is that head's [V, K] state matrix):

    g      = exp(-exp(A_log[h]) * softplus(a[h] + dt_bias[h]))   decay gate, in (0, 1]
    beta   = sigmoid(b[h])                                       update strength, in (0, 1)
    S'     = g * S                                               forget a little
    v_new  = beta * (v - S' k)                                   delta rule: correct the error
    S_new  = S' + v_new k^T                                      rank-1 write
    o      = scale * S_new q

What a contestant would replace: everything in `run`. Each einsum below reads or writes the
whole 1 MiB-per-sequence state (S', S' k, the outer-product update, S_new q, the final copy),
and each is its own kernel launch. A fast kernel reads the state once, keeps a tile of it in
registers, computes S k and S q from that same tile (o = scale * (g * S q + v_new * (k . q))
needs no second pass), and writes new_state once, all in a single launch.
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
def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    B = q.shape[0]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(HEAD_DIM)

    # Drop the seq_len = 1 axis and compute in fp32 (the inputs are bf16).
    q = expand_to_v_heads(q[:, 0].float())          # [B, 8, K]
    k = expand_to_v_heads(k[:, 0].float())          # [B, 8, K]
    v = v[:, 0].float()                             # [B, 8, V]
    g, beta = gates(A_log, a[:, 0], dt_bias, b[:, 0])   # [B, 8] each

    # k-last layout: state[b, h] is a [V, K] matrix with K (the key index) contiguous, so
    # "state times a key vector" is a reduction over the LAST axis: (S k)[v] = sum_k S[v, k] k[k].
    # `state` is optional in the definition; no state means a zero state.
    if state is None:
        S = torch.zeros(B, NUM_V_HEADS, HEAD_DIM, HEAD_DIM, dtype=torch.float32, device=q.device)
    else:
        S = state.float()

    # Every line below is batched over all B sequences and all 8 v-heads at once.
    S = g[:, :, None, None] * S                                   # S' = g S
    v_new = beta[:, :, None] * (v - torch.einsum("bhvk,bhk->bhv", S, k))   # beta (v - S' k)
    S = S + v_new[:, :, :, None] * k[:, :, None, :]               # S' + v_new k^T  ([V, K])
    o = scale * torch.einsum("bhvk,bhk->bhv", S, q)               # scale * S_new q

    output.copy_(o[:, None].to(output.dtype))                     # [B, 1, 8, V], bf16
    new_state.copy_(S)                                            # [B, 8, V, K], fp32
