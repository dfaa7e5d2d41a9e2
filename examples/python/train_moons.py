#!/usr/bin/env python3
"""Data-parallel training of a half-moons classifier from Python, on kiln's multi-stream runtime.

The Python twin of the C++ demo examples/train_moons (main.cc, trainer.cc, moons.cc): the same
program (examples/kiln/moons_mlp.kiln, an MLP 2 -> 16 -> 16 -> 1), the same data, the same steps,
so it prints the same losses and accuracies. It shows the runtime's API beyond the one-call
`Program.compile`: one kiln.Tensors shared by every context, a Backend per device and a Stream
per worker, code compiled once and linked into a context per shard, routines scheduled
asynchronously, and gradients summed across streams through merge buffers
(kiln.device_to_device) instead of a round trip through the host. The program's size B is the
shard's number of points, bound by the shape of the data set: the last batch of an epoch is
smaller, and after training `evaluate` counts the whole data set in one run of the same code.

    train_moons.py [--streams N] [--epochs N] [--device NAME[,NAME...]] [--workgroups N] [--seed N]
                   [--dtype f32|bf16]

With --streams 1 the shards run one after the other on one stream: the same arithmetic in the
same order, so the same parameters as with 2 streams. With --dtype bf16 it trains
examples/kiln/moons_mlp_bf16.kiln instead: the same MLP with bf16 weights, computed and
accumulated in f32, from f32 master weights (the program's comment says why), to the same
accuracy (tests/python/test_train_moons_bf16.py compares the two).
"""

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

import kiln

SHARD_SIZE = 1024  # the program's size B: x : f32[B, 2]
SHARDS = 2
BATCH = SHARDS * SHARD_SIZE
POINTS = 10000  # the last batch of an epoch holds the 1808 left over
NOISE = 0.1

PARAMETERS = ["w1", "b1", "w2", "b2", "w3", "b3"]
# What each shard contributes to shard 0: the gradients and the loss / accuracy counts.
MERGED = ["gw1", "gb1", "gw2", "gb2", "gw3", "gb3", "loss", "correct"]

# The program of each --dtype: where the weights are f32, or bf16 (with f32 masters).
PROGRAMS = {
    "f32": Path(__file__).resolve().parent.parent / "kiln" / "moons_mlp.kiln",
    "bf16": Path(__file__).resolve().parent.parent / "kiln" / "moons_mlp_bf16.kiln",
}
PROGRAM = PROGRAMS["f32"]
# moons_mlp_bf16.kiln: the bf16 copy of each parameter that `grad` and `evaluate` read, which
# `round_weights` and `update` write from the f32 parameter (the master).
BF16_SUFFIX = "_bf16"

_U64 = (1 << 64) - 1


class Random:
    """kiln::Random (src/base/random.cc): splitmix64, in exact integer arithmetic.

    Python floats are IEEE doubles and math.* calls the same libm as the C++, so uniform() and
    normal() give the C++ values bit for bit, and make_moons the C++ demo's data.
    """

    def __init__(self, seed):
        self.state = seed & _U64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & _U64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _U64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _U64
        return z ^ (z >> 31)

    def uniform(self):  # [0, 1)
        return (self.next_u64() >> 11) * 2.0**-53

    def normal(self, mean, stddev):  # Box-Muller, one value per call as in C++
        u1 = self.uniform()
        u2 = self.uniform()
        u1 = max(u1, 1e-300)
        return mean + stddev * math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def make_moons(count, noise, seed):
    """examples/train_moons/moons.cc: `count` shuffled points of two half circles, labels 0/1."""
    random = Random(seed * 0x9E3779B97F4A7C15 + 12345)
    x = np.empty((count, 2), np.float64)
    y = np.empty(count, np.float32)
    for i in range(count):
        upper = i % 2 == 0
        t = math.pi * random.uniform()
        px = math.cos(t) if upper else 1 - math.cos(t)
        py = math.sin(t) if upper else 0.5 - math.sin(t)
        # The same order of calls and of additions as the C++ (x noise first, then y).
        x[i, 0] = (px - 0.5) + random.normal(0, noise)
        x[i, 1] = (py - 0.25) + random.normal(0, noise)
        y[i] = 0.0 if upper else 1.0
    # Fisher-Yates with the C++'s draws (next_u64() % (i + 1)), not numpy's shuffle.
    order = list(range(count))
    for i in range(count - 1, 0, -1):
        j = random.next_u64() % (i + 1)
        order[i], order[j] = order[j], order[i]
    # float32 after the arithmetic in double, as the C++'s static_cast<float>.
    return np.ascontiguousarray(x[order].astype(np.float32)), np.ascontiguousarray(y[order])


def train(streams, epochs, devices, max_workgroups, seed, on_epoch, dtype="f32"):
    """examples/train_moons/trainer.cc's train(): returns (loss, accuracy, seconds, parameters,
    final_accuracy). `dtype` picks the program (PROGRAMS); under either the parameters start from
    the same draws for the same seed (the bf16 program's f32 masters have the f32 one's names and
    INITs), and `parameters` are the f32 ones."""
    program = kiln.Program.from_file(str(PROGRAMS[dtype]))
    tensors = kiln.Tensors(program, seed)  # the host copies, shared by every shard's context
    # The weights every shard's `grad` reads: the parameters, or under bf16 their bf16 copies (the
    # f32 masters are shard 0's `update`'s alone).
    shared = [p + BF16_SUFFIX for p in PARAMETERS] if dtype == "bf16" else PARAMETERS
    # The shards of one device read one array of each parameter, written by shard 0's `update`
    # (the scheduler orders their next `grad` after it); shards on other devices get copies.
    for p in shared:
        tensors.set_sharing(p, "shared")

    # A backend per device, streams round-robin over them.
    backends = [kiln.Backend(d, max_workgroups=max_workgroups) for d in devices]
    stream_list = [backends[s % len(backends)].new_stream() for s in range(streams)]

    # Compiled once (shared, so other devices' backends may link it too), linked per shard.
    code = backends[0].compile(program, shared=True)
    shards = []
    for k in range(SHARDS):
        stream = stream_list[k % streams]
        backend = backends[(k % streams) % len(backends)]
        context = backend.context(stream, tensors).link(code)
        routines = {name: context.routine(name) for name in code.routines}
        shards.append((context, routines))

    x, y = make_moons(POINTS, NOISE, seed)
    steps = (POINTS + BATCH - 1) // BATCH
    zero = np.zeros((), np.float32)
    context0, routines0 = shards[0]

    def run_grads(step):
        # The batch's points, shared out as evenly as they go (the last batch is smaller).
        batch = min(BATCH, POINTS - step * BATCH)
        first = step * BATCH
        for k, (_, routines) in enumerate(shards):
            points = batch // SHARDS + (1 if k < batch % SHARDS else 0)
            # Copied into the host copies now (binding B) and uploaded when `grad` is
            # scheduled, so the next shard may overwrite them at once.
            tensors.set("x", x[first:first + points])
            tensors.set("y", y[first:first + points])
            routines["grad"].run()
            first += points

    def share_parameters():
        # To shards on other devices; on shard 0's device they share its arrays (nothing moves).
        for context, _ in shards[1:]:
            for p in shared:
                kiln.device_to_device(p, context, context0, merge="no")

    def run_update():
        for context, _ in shards[1:]:
            for g in MERGED:
                # Shard 0 reads shard k's gradient as `g.merge` after shard k's `grad`, straight
                # from its array on one device ("streaming"; across devices it is copied into
                # the merge buffer, as "copy"): no host round trip either way.
                kiln.device_to_device(g, context0, context, merge="streaming")
                routines0["merge_" + g].run()
        routines0["update"].run()
        share_parameters()

    start = time.perf_counter()
    if "round_weights" in routines0:  # bf16: the copies of the masters' first values
        routines0["round_weights"].run()
        share_parameters()
    tensors.set("epoch_loss", zero)
    tensors.set("epoch_correct", zero)
    run_grads(0)
    for epoch in range(epochs):
        for step in range(steps):
            run_update()
            if step + 1 < steps:
                run_grads(step + 1)
        # The totals start back to the host and the next epoch's first gradients are scheduled
        # before waiting for them, so that the streams never wait for this thread.
        kiln.to_host(context0, "epoch_loss")
        kiln.to_host(context0, "epoch_correct")
        if epoch + 1 < epochs:
            run_grads(0)
        # Divided in float32 as the C++ (float / int), so that the printed digits round the same way.
        loss = float(tensors.get("epoch_loss") / np.float32(POINTS))
        accuracy = float(tensors.get("epoch_correct") / np.float32(POINTS))
        on_epoch(epoch, loss, accuracy)
        tensors.set("epoch_loss", zero)  # the next epoch's first update adds into them
        tensors.set("epoch_correct", zero)
    for backend in backends:
        backend.wait()
    seconds = time.perf_counter() - start
    parameters = {p: tensors.get(p) for p in PARAMETERS}
    # The whole data set in one run of the same compiled program: B = all the points.
    tensors.set("x", x)
    tensors.set("y", y)
    shards[0][1]["evaluate"].run()
    final_accuracy = float(tensors.get("eval_correct") / np.float32(POINTS))
    return loss, accuracy, seconds, parameters, final_accuracy


def progress(epoch, epochs, loss, accuracy):
    """main.cc's progress(): into a file or a pipe, a line every tenth of the run; else a bar."""
    if not sys.stdout.isatty():
        if (epoch + 1) % max(1, epochs // 10) == 0 or epoch + 1 == epochs:
            print(f"epoch {epoch + 1:3d}/{epochs}  loss {loss:.4f}  accuracy {100 * accuracy:5.1f}%")
        return
    width = 30
    bar = ("#" * ((epoch + 1) * width // epochs)).ljust(width, ".")
    end = "\n" if epoch + 1 == epochs else ""
    print(f"\r[{bar}] epoch {epoch + 1:3d}/{epochs}  loss {loss:.4f}  accuracy {100 * accuracy:5.1f}%",
          end=end, flush=True)


def bounded_int(lo, hi):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer in [{lo}, {hi}], got {text!r}")
        return value
    return parse


def device_list(text):
    names = text.split(",")
    if any(not n for n in names):
        raise argparse.ArgumentTypeError("expected comma-separated device names")
    return names


def training_parser(prog, description, epochs, seed_help="seed (default 0)"):
    """The options of the Python training examples (this one and examples/digits/train_digits.py)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--streams", type=bounded_int(1, 64), default=2, help="streams (default 2)")
    parser.add_argument("--epochs", type=bounded_int(1, 100000), default=epochs,
                        help=f"epochs (default {epochs})")
    parser.add_argument("--device", type=device_list, default=["cpu"],
                        help="device(s) the streams go on, round-robin (default cpu)")
    parser.add_argument("--workgroups", type=bounded_int(0, 1 << 20), default=1,
                        help="workgroups per kernel: 1 makes each stream one core, 0 splits kernels "
                             "over the device's workers (default 1)")
    parser.add_argument("--seed", type=bounded_int(0, 1 << 62), default=0, help=seed_help)
    return parser


DEMO_EPOCHS = 40  # the demo's own run; at least this long, it must reach DEMO_ACCURACY
DEMO_ACCURACY = 0.95


def exit_status(script, accuracy, epochs, demo_run=True):
    """The examples' exit status: 1, saying so, when a run at least as long as the demo's own
    (`epochs` >= DEMO_EPOCHS, and `demo_run`: nothing else shortened) ends below the demo's 95%
    accuracy; else 0. A run the user shortened only reports its accuracy."""
    if demo_run and epochs >= DEMO_EPOCHS and accuracy < DEMO_ACCURACY:
        print(f"{script}: accuracy {100 * accuracy:.1f}% is below {100 * DEMO_ACCURACY:.0f}% after {epochs} epochs",
              file=sys.stderr)
        return 1
    return 0


def main():
    parser = training_parser(
        "train_moons.py", "Trains the half-moons MLP of examples/train_moons on kiln streams from Python.",
        epochs=DEMO_EPOCHS)
    parser.add_argument("--dtype", choices=sorted(PROGRAMS), default="f32",
                        help="the weights' element type: f32 (moons_mlp.kiln) or bf16 with f32 master "
                             "weights (moons_mlp_bf16.kiln) (default f32)")
    args = parser.parse_args()

    last = POINTS % BATCH or BATCH
    print(f"training a 2-16-16-1 MLP on {POINTS} half-moons points, batch {BATCH} in {SHARDS} shards "
          f"(the last batch {last}), on {args.streams} stream{'' if args.streams == 1 else 's'}"
          f"{', bf16 weights' if args.dtype == 'bf16' else ''}", flush=True)
    try:
        _, _, seconds, _, final_accuracy = train(
            args.streams, args.epochs, args.device, args.workgroups, args.seed,
            lambda epoch, loss, acc: progress(epoch, args.epochs, loss, acc), dtype=args.dtype)
    except (kiln.Error, ValueError, OSError) as e:
        print(f"\ntrain_moons.py: {e}", file=sys.stderr)
        return 1
    # One accuracy: the trained MLP's on every point (one run of `evaluate`), as main.cc prints it.
    print(f"accuracy {100 * final_accuracy:.1f}%, {1e3 * seconds / args.epochs:.2f} ms per epoch "
          f"({args.streams} streams; the trained MLP on all {POINTS} points)")
    return exit_status("train_moons.py", final_accuracy, args.epochs)


if __name__ == "__main__":
    sys.exit(main())
