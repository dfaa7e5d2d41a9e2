"""PyTorch on the GPU, timed like `kiln run --repeat 20` (each run waited for), for
scripts/cuda-device-check.sh. Prints one line like kiln's. Tasks, each beside a program here:
  relu_fma     torch.relu(a * b + c) over 2^24 f32 (relu_fma_2e24.kiln)
  matmul_bf16  torch.matmul of two 8192x8192 bf16 matrices into bf16 (matmul_bf16_8192.kiln)
  moons_epoch  one epoch of the demo's training (examples/kiln/moons_mlp.kiln, `train_moons`):
               the 2 -> 16 -> 16 -> 1 MLP (tanh, sigmoid, binary cross-entropy summed over the
               batch, plain SGD at 0.0005) over 10000 points in batches of 2048, each step's
               forward, backward and update on the GPU
Usage: python3 torch_gpu.py TASK"""
import sys
import time

import torch


def task(name):
    if name == "relu_fma":
        n = 1 << 24
        a, b, c = (torch.rand(n, device="cuda") for _ in range(3))
        return lambda: torch.relu(a * b + c), None
    if name == "matmul_bf16":
        n = 8192
        a, b = (torch.rand(n, n, device="cuda").bfloat16() for _ in range(2))
        out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b, out=out), 2 * n**3
    if name == "moons_epoch":
        return moons_epoch(), None
    sys.exit(f"torch_gpu.py: unknown task {name!r} (relu_fma, matmul_bf16, moons_epoch)")


def moons_epoch(device="cuda", points=10000, batch=2048):
    torch.manual_seed(0)
    x = torch.randn(points, 2, device=device)
    y = (x[:, 0] * x[:, 1] > 0).float()
    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0005)
    loss_of = torch.nn.BCEWithLogitsLoss(reduction="sum")

    def epoch():
        for first in range(0, points, batch):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_of(model(x[first:first + batch]).squeeze(1), y[first:first + batch])
            loss.backward()
            optimizer.step()

    return epoch


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run, flops = task(sys.argv[1])
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    rate = f", {flops / (times[10] * 1e-3) / 1e12:.1f} TFLOP/s at the median" if flops else ""
    print(f"torch {torch.__version__} {sys.argv[1]}: 20 runs: min {times[0]:.4f} ms, median {times[10]:.4f} ms, "
          f"max {times[-1]:.4f} ms{rate}")


main()
