#!/usr/bin/env python3
"""Data-parallel training of a small CNN on scikit-learn's 8x8 digits, on kiln's multi-stream
runtime from Python.

The model (digits_cnn.kiln beside this file): a 3x3 convolution 1 -> 8 channels that keeps the
8x8 image (512 features), relu, a dense layer 512 -> 10, softmax cross-entropy, SGD, gradients
written by hand. The runtime is used as examples/python/train_moons.py uses it: one kiln.Tensors
shared by a context per shard, a Stream per worker, code compiled once and linked per shard,
routines scheduled asynchronously, and gradients summed across streams through merge buffers
(kiln.device_to_device). Each batch of 64 images is split into 2 shards; the program's size B
is the shard's number of images, so the last, smaller batch of an epoch runs the same code, and
after training `evaluate` counts the 360 held-out images in one run of it.

    train_digits.py [--streams N] [--epochs N] [--device NAME[,NAME...]] [--workgroups N] [--seed N]

The data, the initial weights and the order of the batches come from digits_data.py, which
`make bench-peers` gives PyTorch too. With --streams 1 the shards run one after the other on one
stream: the same arithmetic in the same order, so the same parameters as with 2 streams.
"""

import statistics
import sys
import time
from pathlib import Path

import numpy as np

import kiln

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "python")]
# Found through the line above: the data beside this script, and the options of the half-moons
# example, which this script shares.
import digits_data  # noqa: E402
from train_moons import training_parser  # noqa: E402

PROGRAM = HERE / "digits_cnn.kiln"
SHARDS = 2
BATCH = 64  # images per step, SHARDS shards of 32 (the last batch of an epoch: 29, 15 + 14)
# What each shard contributes to shard 0: the gradients and the loss / accuracy counts.
MERGED = ["gwc", "gbc", "gwd", "gbd", "loss", "correct"]


def shard_sizes(batch):
    """A batch shared out as evenly as it goes, the first shards taking one more."""
    return [batch // SHARDS + (1 if k < batch % SHARDS else 0) for k in range(SHARDS)]


class Trainer:
    """The program linked into a context per shard over one kiln.Tensors, ready to train."""

    def __init__(self, streams, devices, max_workgroups, seed):
        if streams < 1:
            raise ValueError(f"streams must be at least 1, got {streams}")
        if not devices:
            raise ValueError("no device given")
        program = kiln.Program.from_file(str(PROGRAM))
        self.tensors = kiln.Tensors(program, seed)  # the host copies, shared by every shard's context
        for name, value in digits_data.initial_parameters(seed).items():
            self.tensors.set(name, value)

        # A backend per device, streams round-robin over them.
        self.backends = [kiln.Backend(d, max_workgroups=max_workgroups) for d in devices]
        stream_list = [self.backends[s % len(self.backends)].new_stream() for s in range(streams)]
        # Compiled once (shared, so other devices' backends may link it too), linked per shard.
        code = self.backends[0].compile(program, shared=True)
        self.shards = []
        for k in range(SHARDS):
            backend = self.backends[(k % streams) % len(self.backends)]
            context = backend.context(stream_list[k % streams], self.tensors).link(code)
            self.shards.append((context, {name: context.routine(name) for name in code.routines}))

    def epoch(self, images, labels, order):
        """One pass over images[order] in batches of BATCH: (summed loss, images classified
        right) from the running totals, after waiting for the last update."""
        zero = np.zeros((), np.float32)
        self.tensors.set("epoch_loss", zero)
        self.tensors.set("epoch_correct", zero)
        images, labels = images[order], labels[order]  # contiguous, so each shard is a view
        context0, routines0 = self.shards[0]
        for start in range(0, len(labels), BATCH):
            first = start
            for (_, routines), count in zip(self.shards, shard_sizes(min(BATCH, len(labels) - start))):
                # Copied into the host copies now (binding B) and uploaded when `grad` is
                # scheduled, so the next shard may overwrite them at once.
                self.tensors.set("img", images[first:first + count])
                self.tensors.set("lab", labels[first:first + count])
                routines["grad"].run()
                first += count
            for context, _ in self.shards[1:]:
                for g in MERGED:
                    # Shard 0 reads shard k's gradient as `g.merge` straight from its array on
                    # one device ("streaming"): no host round trip.
                    kiln.device_to_device(g, context0, context, merge="streaming")
                    routines0["merge_" + g].run()
            routines0["update"].run()
            for context, _ in self.shards[1:]:
                for p in digits_data.PARAMETERS:
                    kiln.device_to_device(p, context, context0, merge="no")
        # Reading waits for the update that wrote the totals.
        return float(self.tensors.get("epoch_loss")), int(self.tensors.get("epoch_correct"))

    def accuracy(self, images, labels):
        """The share of `images` the current parameters classify right: one run, B = all."""
        self.tensors.set("img", images)
        self.tensors.set("lab", labels)
        self.shards[0][1]["evaluate"].run()
        return int(self.tensors.get("eval_correct")) / len(labels)

    def parameters(self):
        return {p: self.tensors.get(p) for p in digits_data.PARAMETERS}

    def close(self):
        for backend in self.backends:
            backend.close()


def train(streams, epochs, devices=("cpu",), max_workgroups=1, seed=0, on_epoch=None):
    """Trains from digits_data's initial weights: returns a dict with the per-epoch `seconds`,
    the final `parameters` and the `test_accuracy` on the held-out images. on_epoch(epoch,
    mean loss, train accuracy, seconds) is called after each epoch."""
    train_x, train_y, test_x, test_y = digits_data.split(*digits_data.load())
    trainer = Trainer(streams, list(devices), max_workgroups, seed)
    try:
        seconds = []
        for epoch in range(epochs):
            start = time.perf_counter()
            order = digits_data.batch_order(len(train_y), epoch, seed)
            loss, correct = trainer.epoch(train_x, train_y, order)
            seconds.append(time.perf_counter() - start)
            if on_epoch:
                on_epoch(epoch, loss / len(train_y), correct / len(train_y), seconds[-1])
        return {"seconds": seconds, "parameters": trainer.parameters(),
                "test_accuracy": trainer.accuracy(test_x, test_y)}
    finally:
        trainer.close()


def main():
    args = training_parser(
        "train_digits.py", "Trains a small CNN on the 8x8 digits with kiln streams from Python.", epochs=10,
        seed_help="seed of the initial weights and the batch order (default 0)").parse_args()

    streams = f"{args.streams} stream{'' if args.streams == 1 else 's'}"
    print(f"training a CNN (3x3 conv 1 -> {digits_data.CHANNELS}, relu, dense 512 -> 10) on "
          f"{digits_data.IMAGES - digits_data.TEST} digits, batch {BATCH} in {SHARDS} shards, on {streams}",
          flush=True)

    def progress(epoch, loss, accuracy, seconds):
        print(f"epoch {epoch + 1:3d}/{args.epochs}  loss {loss:.4f}  train accuracy {100 * accuracy:5.1f}%  "
              f"{1e3 * seconds:.2f} ms", flush=True)

    try:
        result = train(args.streams, args.epochs, args.device, args.workgroups, args.seed, progress)
    except (kiln.Error, ValueError, OSError) as e:
        print(f"\ntrain_digits.py: {e}", file=sys.stderr)
        return 1
    # The first epoch also uploads the parameters and warms the caches: the median leaves it out
    # unless it is the only one.
    timed = result["seconds"][1:] or result["seconds"]
    print(f"epoch time: median {1e3 * statistics.median(timed):.2f} ms per epoch ({streams})")
    print(f"test accuracy {100 * result['test_accuracy']:.1f}% on the {digits_data.TEST} held-out digits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
