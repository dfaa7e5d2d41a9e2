#!/usr/bin/env python3
"""The half-moons classifier of examples/train_moons, trained by kiln on batches from PyTorch.

PyTorch only supplies the data: a torch.utils.data.DataLoader over a TensorDataset shuffles the
points and cuts them into batches. kiln computes everything else with the demo's program
(examples/kiln/moons_mlp.kiln): `grad` (forward and backward) and `update` (SGD) on each batch,
`evaluate` at the end. Each batch goes to kiln through DLPack, kiln.from_dlpack(batch), which
shares the batch's memory instead of copying it; running `grad` binds it as the program's input
arrays (on cpu and interp; other devices copy it). The program's size B takes each batch's size,
so the last, smaller batch of an epoch runs the same compiled code. The loss and the count of right answers are read through torch
views of kiln's own arrays (torch.from_dlpack(run.tensor(...))), again without a copy.

    train_moons_torch.py [--epochs N] [--batch N] [--device cpu|interp] [--seed N]
"""

import argparse
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

import kiln
from train_moons import DEMO_EPOCHS, NOISE, POINTS, PROGRAM, bounded_int, exit_status, make_moons

BATCH = 2048  # the demo's batch: the program's learning rate is per point of it


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=bounded_int(1, 100000), default=DEMO_EPOCHS,
                        help=f"epochs (default {DEMO_EPOCHS})")
    # The program's learning rate is per point of a 2048-point batch (its gradients are sums).
    parser.add_argument("--batch", type=bounded_int(1, POINTS), default=BATCH, help=f"batch size (default {BATCH})")
    parser.add_argument("--device", choices=["cpu", "interp"], default="cpu",
                        help="a device with host memory, which torch can view (default cpu)")
    parser.add_argument("--seed", type=bounded_int(0, 1 << 62), default=0, help="seed (default 0)")
    args = parser.parse_args()

    x, y = make_moons(POINTS, NOISE, args.seed)  # NumPy arrays: torch.from_numpy shares them
    data = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    loader = DataLoader(data, batch_size=args.batch, shuffle=True,
                        generator=torch.Generator().manual_seed(args.seed))

    run = kiln.Program.from_file(str(PROGRAM)).compile(device=args.device, seed=args.seed)
    loss = torch.from_dlpack(run.tensor("loss"))  # what `grad` computes for its batch
    correct = torch.from_dlpack(run.tensor("correct"))
    print(f"training a 2-16-16-1 MLP on {POINTS} half-moons points, batches of {args.batch} "
          f"from a torch DataLoader, on kiln's {args.device} device", flush=True)
    for epoch in range(args.epochs):
        epoch_loss = epoch_correct = 0.0
        for xb, yb in loader:
            run("grad", x=kiln.from_dlpack(xb), y=kiln.from_dlpack(yb))
            run("update")
            epoch_loss += loss.item()
            epoch_correct += correct.item()
        if (epoch + 1) % max(1, args.epochs // 10) == 0 or epoch + 1 == args.epochs:
            print(f"epoch {epoch + 1:3d}/{args.epochs}  loss {epoch_loss / POINTS:.4f}  "
                  f"accuracy {100 * epoch_correct / POINTS:5.1f}%")

    # The whole data set in one run of the same compiled program: B = all the points.
    right = run("evaluate", x=kiln.from_dlpack(data.tensors[0]), y=kiln.from_dlpack(data.tensors[1]))
    accuracy = float(right["eval_correct"]) / POINTS
    print(f"accuracy on all {POINTS} points: {100 * accuracy:.1f}%")
    # Larger batches take fewer steps per epoch: then the run is shorter than the demo's own.
    return exit_status("train_moons_torch.py", accuracy, args.epochs, demo_run=args.batch <= BATCH)


if __name__ == "__main__":
    sys.exit(main())
