"""Diagnostic (GPU, FlashInfer installed): how much of the prefill reference's time under the official timer is
CUPTI's activity buffer. FlashInfer's bench_gpu_time_with_cupti asks CUPTI for 8 MiB buffers; the reference launches
many small kernels per token, and once a call's activity records overflow a buffer, its completion callback runs
while the call is still being timed. This times the definition's reference on one sequence of T tokens (one warmup,
one timed call, cold L2), once with FlashInfer's function as installed and once with a copy of its module in which
only the buffer size is 512 MiB (the copy lives in memory for this run; nothing is written).

    python tools/cupti_buffer.py 400 661 832 1200

Prints T and the two latencies in ms."""
import argparse
import math
import types

import torch

from harness.data.dataset import Dataset
from harness.eval.reference import load_reference

PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
SHIPPED_BUFFER = "buffer_size = 8 * 1024 * 1024"


def big_buffer_module():
    """FlashInfer's testing utilities with CUPTI buffers of 512 MiB instead of 8."""
    import flashinfer.testing.utils as shipped
    source = open(shipped.__file__).read()
    if SHIPPED_BUFFER not in source:
        raise SystemExit(f"{shipped.__file__} does not set '{SHIPPED_BUFFER}': this FlashInfer differs")
    module = types.ModuleType("flashinfer_testing_big_buffer")
    module.__package__ = "flashinfer.testing"
    exec(compile(source.replace(SHIPPED_BUFFER, "buffer_size = 512 * 1024 * 1024"), module.__name__, "exec"),
         module.__dict__)
    return shipped, module


def one_sequence(T, device="cuda"):
    """The reference's arguments for one sequence of T tokens: random bf16 q, v, gates; unit-norm keys."""
    g = torch.Generator(device=device).manual_seed(0)
    r = lambda *shape: torch.randn(*shape, device=device, generator=g).to(torch.bfloat16)  # noqa: E731
    q, k, v = r(T, 4, 128), r(T, 4, 128), r(T, 8, 128)
    k = k / k.float().norm(dim=-1, keepdim=True).to(k.dtype)
    state = torch.randn(1, 8, 128, 128, device=device, generator=g) * 0.1
    zeros = torch.zeros(8, device=device)
    a, b = r(T, 8), r(T, 8)
    cu_seqlens = torch.tensor([0, T], dtype=torch.int32, device=device)
    return q, k, v, state, zeros, a, zeros, b, cu_seqlens, 1 / math.sqrt(128)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tokens", nargs="+", type=int, help="sequence lengths to time")
    args = parser.parse_args()
    reference = load_reference(Dataset().definition(PREFILL))
    timers = big_buffer_module()
    print("T  ms(8 MiB buffers, as shipped)  ms(512 MiB buffers)")
    for T in args.tokens:
        inputs = one_sequence(T)
        ms = [float(torch.as_tensor(m.bench_gpu_time_with_cupti(fn=reference, input_args=inputs, dry_run_iters=1,
                                                                repeat_iters=1, cold_l2_cache=True)).median())
              for m in timers]
        print(T, *(f"{x:.2f}" for x in ms), flush=True)


if __name__ == "__main__":
    main()
