"""The definition's fixed sizes, as host ints and as the constexprs the device code reads."""
import triton.language as tl

HK = 4          # q/k heads
HV = 8          # v heads; v-head h reads q/k head h // (HV // HK)
D = 128         # head size (K == V)

NHK = tl.constexpr(HK)
NHV = tl.constexpr(HV)
DK = tl.constexpr(D)
