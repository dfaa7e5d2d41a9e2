"""PyTorch's torch.relu(a * b + c) over 2^24 f32 on the GPU, timed like `kiln run --repeat 20`
(each run waited for), for scripts/cuda-device-check.sh. Prints one line like kiln's."""
import time

import torch

n = 1 << 24
a, b, c = (torch.rand(n, device="cuda") for _ in range(3))
for _ in range(3):
    y = torch.relu(a * b + c)
torch.cuda.synchronize()
times = []
for _ in range(20):
    t0 = time.perf_counter()
    y = torch.relu(a * b + c)
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(f"torch {torch.__version__}: 20 runs: min {times[0]:.4f} ms, median {times[10]:.4f} ms, max {times[-1]:.4f} ms")
