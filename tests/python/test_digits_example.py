"""examples/digits: the CNN's hand-written gradients, and training on 1 and 2 streams.

kiln has no autograd, so examples/digits/digits_cnn.kiln writes the backward pass by hand. Its
`grad` is checked against a NumPy reference in float64, and that reference against central
finite differences of its own loss, so a wrong derivative in either shows. The training runs are
short (1-2 epochs of 23 steps) so that the file takes seconds.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln
from conftest import DEVICES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits"
SCRIPT = EXAMPLE / "train_digits.py"
sys.path.insert(0, str(EXAMPLE))
import digits_data  # noqa: E402
import train_digits  # noqa: E402

TIMEOUT_S = 120
GRADIENTS = {"wc": "gwc", "bc": "gbc", "wd": "gwd", "bd": "gbd"}


# --- the NumPy reference, float64 ---

def forward(p, img):
    """(relu output [B, 8, 8, 8], logits [B, 10]) of the model with parameters p."""
    padded = np.pad(img, ((0, 0), (1, 1), (1, 1)))
    conv = np.zeros((len(img), 8, 8, 8))
    for ky in range(3):
        for kx in range(3):
            conv += padded[:, None, ky:ky + 8, kx:kx + 8] * p["wc"][None, :, ky, kx, None, None]
    h = np.maximum(conv + p["bc"][None, :, None, None], 0)
    return h, h.reshape(len(img), -1) @ p["wd"].reshape(512, 10) + p["bd"]


def loss_of(p, img, lab):
    """The summed softmax cross-entropy."""
    _, z = forward(p, img)
    m = z.max(1)
    return float(np.sum(m + np.log(np.exp(z - m[:, None]).sum(1)) - z[np.arange(len(lab)), lab]))


def reference_gradients(p, img, lab):
    h, z = forward(p, img)
    e = np.exp(z - z.max(1, keepdims=True))
    dz = e / e.sum(1, keepdims=True)
    dz[np.arange(len(lab)), lab] -= 1
    dh = (dz @ p["wd"].reshape(512, 10).T).reshape(h.shape) * (h > 0)
    padded = np.pad(img, ((0, 0), (1, 1), (1, 1)))
    gwc = np.zeros((8, 3, 3))
    for ky in range(3):
        for kx in range(3):
            gwc[:, ky, kx] = np.sum(padded[:, None, ky:ky + 8, kx:kx + 8] * dh, axis=(0, 2, 3))
    return {"wc": gwc, "bc": dh.sum((0, 2, 3)),
            "wd": (h.reshape(len(img), -1).T @ dz).reshape(8, 8, 8, 10), "bd": dz.sum(0)}


@pytest.fixture(scope="module")
def batch():
    """32 training images, float64 parameters from digits_data (biases made nonzero, so that the
    bias terms are tested too)."""
    train_x, train_y, _, _ = digits_data.split(*digits_data.load())
    rng = np.random.default_rng(5)
    p = {k: v.astype(np.float64) for k, v in digits_data.initial_parameters(3).items()}
    p["bc"] = rng.normal(0, 0.1, p["bc"].shape)
    p["bd"] = rng.normal(0, 0.1, p["bd"].shape)
    return p, train_x[:32], train_y[:32]


def test_data_set_is_the_1797_digits():
    images, labels = digits_data.load()
    assert images.shape == (1797, 8, 8) and images.dtype == np.float32
    assert 0 <= images.min() and images.max() == 1
    assert np.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    train_x, _, test_x, _ = digits_data.split(images, labels)
    assert (len(train_x), len(test_x)) == (1437, 360)


def test_reference_gradients_are_finite_differences(batch):
    p, img, lab = batch
    grads = reference_gradients(p, img, lab)
    rng = np.random.default_rng(0)
    for name in GRADIENTS:
        for _ in range(4):
            at = tuple(rng.integers(0, d) for d in p[name].shape)
            step = 1e-6
            up = {k: v.copy() for k, v in p.items()}
            down = {k: v.copy() for k, v in p.items()}
            up[name][at] += step
            down[name][at] -= step
            numeric = (loss_of(up, img, lab) - loss_of(down, img, lab)) / (2 * step)
            assert grads[name][at] == pytest.approx(numeric, rel=1e-5, abs=1e-6), (name, at)


@pytest.mark.parametrize("device", [d for d in ("cpu", "interp") if d in DEVICES])
def test_kiln_gradients_match_numpy(batch, device):
    p, img, lab = batch
    run = kiln.Program.from_file(str(train_digits.PROGRAM)).compile(device=device)
    for name, value in p.items():
        run.set(name, value.astype(np.float32))
    run("grad", img=img, lab=lab)
    expected = reference_gradients(p, img, lab)
    for name, grad in GRADIENTS.items():
        got = run.get(grad)
        scale = np.abs(expected[name]).max()
        # float32 sums of at most 32 * 64 terms against float64: a few ulps of the largest value.
        np.testing.assert_allclose(got, expected[name], rtol=0, atol=2e-5 * scale, err_msg=grad)
    assert float(run.get("loss")) == pytest.approx(loss_of(p, img, lab), rel=1e-5)
    _, z = forward(p, img)
    assert int(run.get("correct")) == int(np.sum(z.argmax(1) == lab))


def test_training_loss_falls_and_streams_agree():
    losses = {1: [], 2: []}
    results = {}
    for streams in (1, 2):
        results[streams] = train_digits.train(
            streams, 2, on_epoch=lambda epoch, loss, acc, s, streams=streams: losses[streams].append(loss))
    # The shards of one stream run one after the other, the same arithmetic in the same order.
    for name in digits_data.PARAMETERS:
        np.testing.assert_array_equal(results[1]["parameters"][name], results[2]["parameters"][name],
                                      err_msg=name)
    assert losses[1] == losses[2]
    first, second = losses[2]
    assert first < np.log(10) and second < 0.75 * first, losses[2]
    assert results[2]["test_accuracy"] > 0.85


def test_one_step_matches_numpy_sgd():
    """The first two batches through train_digits' trainer, against NumPy SGD on the same batches:
    the merge of the shards and the update are right, not only `grad`."""
    train_x, train_y, _, _ = digits_data.split(*digits_data.load())
    order = digits_data.batch_order(len(train_y), 0, 0)
    p = {k: v.astype(np.float64) for k, v in digits_data.initial_parameters(0).items()}
    lr = 0.2 / 64
    for step in range(2):
        at = order[step * 64:(step + 1) * 64]
        g = reference_gradients(p, train_x[at], train_y[at])
        p = {k: p[k] - lr * g[k] for k in p}
    trainer = train_digits.Trainer(2, ["cpu"], 1, 0)
    try:
        # An epoch over the first 128 images of batch_order's order is these two steps.
        trainer.epoch(train_x, train_y, order[:128])
        got = trainer.parameters()
    finally:
        trainer.close()
    for name in p:
        np.testing.assert_allclose(got[name], p[name], rtol=0, atol=1e-5 * np.abs(p[name]).max() + 1e-7,
                                   err_msg=name)


def run_script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=dict(os.environ))


def test_script_prints_epochs_and_accuracy():
    result = run_script("--epochs", "1")
    assert result.returncode == 0, result.stderr
    assert "epoch   1/1  loss " in result.stdout
    assert "ms per epoch (2 streams)" in result.stdout
    assert "test accuracy " in result.stdout


def test_bad_option_fails_with_a_message():
    result = run_script("--streams", "0")
    assert result.returncode != 0
    assert "--streams" in result.stderr
