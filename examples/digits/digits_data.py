"""The digits data set and everything a run of the digits CNN must agree on with its peers.

train_digits.py (kiln), its test and the PyTorch peer of `make bench-peers` (bench/peers) all
take the data, the split, the initial weights and the order of the batches from here, so that
they train the same model on the same batches from the same start, and only the framework
differs. NumPy only: the peers' Python (Debian's, with PyTorch) has no kiln.

The 1,797 images are the copy of the UCI "Optical Recognition of Handwritten Digits" test set
that scikit-learn ships (digits.csv.gz beside this file; README.md says where it comes from and
its license): 8x8 images of pixels 0..16, then the label, one image a line.
"""

import gzip
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "digits.csv.gz"

IMAGES = 1797
SIDE = 8
CLASSES = 10
CHANNELS = 8  # the convolution's output channels: 8 * 8 * 8 = 512 features for the dense layer
TEST = 360  # held out for the accuracy the runs report; the other 1437 images train

SHAPES = {"wc": (CHANNELS, 3, 3), "bc": (CHANNELS,), "wd": (CHANNELS, SIDE, SIDE, CLASSES),
          "bd": (CLASSES,)}
PARAMETERS = list(SHAPES)


def load(path=DATA):
    """(images f32[1797, 8, 8] scaled to [0, 1], labels i32[1797]) in the file's order."""
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    if table.shape != (IMAGES, SIDE * SIDE + 1):
        raise ValueError(f"{path}: expected {IMAGES} lines of {SIDE * SIDE + 1} numbers, "
                         f"got shape {table.shape}")
    images = (table[:, :-1].reshape(IMAGES, SIDE, SIDE) / 16.0).astype(np.float32)
    labels = table[:, -1].astype(np.int32)
    if labels.min() < 0 or labels.max() >= CLASSES:
        raise ValueError(f"{path}: labels outside 0..{CLASSES - 1}")
    return images, labels


def split(images, labels):
    """(train images, train labels, test images, test labels): one fixed shuffle (seed 0,
    whatever the run's seed), so every run and every peer tests on the same 360 images."""
    order = np.random.default_rng(0).permutation(len(labels))
    train, test = order[:-TEST], order[-TEST:]
    return (np.ascontiguousarray(images[train]), np.ascontiguousarray(labels[train]),
            np.ascontiguousarray(images[test]), np.ascontiguousarray(labels[test]))


def initial_parameters(seed):
    """He-scaled normal weights (std sqrt(2 / fan_in)), zero biases, as float32 arrays."""
    rng = np.random.default_rng([seed, 1])
    fan_in = {"wc": 9, "wd": CHANNELS * SIDE * SIDE}
    return {name: (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in[name])).astype(np.float32)
            if name in fan_in else np.zeros(shape, np.float32)
            for name, shape in SHAPES.items()}


def batch_order(count, epoch, seed):
    """The order in which an epoch visits the `count` training images: a permutation of its own
    for each (seed, epoch), the same however many epochs ran before."""
    return np.random.default_rng([seed, 2, epoch]).permutation(count)
