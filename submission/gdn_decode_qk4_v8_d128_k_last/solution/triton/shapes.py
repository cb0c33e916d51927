"""The definition's fixed sizes."""
HK = 4          # q/k heads
HV = 8          # v heads; v-head h reads q/k head h // 2
K_DIM = 128     # head size (K == V)
V_DIM = 128
