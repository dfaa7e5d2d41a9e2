"""examples/transformer: the decoder block against its NumPy reference, its causal mask, its
initial parameters and the script that runs it.

The block's values are checked on `interp` (the reference interpreter of the same lowered
program) and on `cpu`, whose C kernels now build in about 2 s from an empty cache on 2 cores (it
took 15-30 s before register tiles were limited to loads a tile reuses: docs/performance.md,
"Compile time"); the other tests use `interp`. examples/transformer/run_decoder.py also checks
the cpu build against PyTorch.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "transformer"
sys.path.insert(0, str(EXAMPLE))
import decoder_reference  # noqa: E402

DEVICE = "interp"


def tolerance(reference):
    """f32 against float64: a few ulps of the largest value, with room for sums of 256 terms."""
    return 1e-5 * max(1.0, float(np.abs(reference).max()))


@pytest.fixture(scope="module", params=["interp", "cpu"])
def block(request):
    """The block compiled once per device, with parameters whose LayerNorm shifts and scales are
    not 0 and 1."""
    run = kiln.Program.from_file(str(decoder_reference.PROGRAM)).compile(device=request.param)
    params = decoder_reference.random_parameters(seed=3, scale=0.2)
    for name, value in params.items():
        run.set(name, value)
    return run, params


def test_program_declares_the_reference_parameters():
    program = kiln.Program.from_file(str(decoder_reference.PROGRAM))
    assert program.sizes == ["B", "T"]
    params = {name: shape for name, (role, dtype, shape) in program.tensors.items() if role == "param"}
    assert params == decoder_reference.PARAMETERS
    assert program.tensors["x"] == ("input", "float32", ("B", "T", 64))
    assert program.tensors["y"] == ("output", "float32", ("B", "T", 64))


def test_initial_parameters_are_pytorchs():
    """LayerNorms start at scale 1 and shift 0, Linear weights and biases uniform in
    ±1/sqrt(fan in), as PyTorch's layers start; the same seed gives the same values."""
    program = kiln.Program.from_file(str(decoder_reference.PROGRAM))
    first, again = program.compile(device=DEVICE, seed=7), program.compile(device=DEVICE, seed=7)
    for ln in ("ln1", "ln2"):
        assert np.all(first.get(ln + "_g") == 1) and np.all(first.get(ln + "_b") == 0)
    bounds = {n: 1 / 8 for n in ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "w1", "b1")}
    bounds.update(w2=1 / 16, b2=1 / 16)
    for name, bound in bounds.items():
        value = first.get(name)
        assert np.abs(value).max() <= bound and np.abs(value).max() > 0.9 * bound, name
        np.testing.assert_array_equal(value, again.get(name))


@pytest.mark.parametrize("batch, length", [(2, 5), (1, 1), (3, 9)])
def test_block_matches_numpy(block, batch, length):
    """One compiled program at several (B, T): T = 1 (a query that sees only itself) too."""
    run, params = block
    x = np.random.default_rng(batch * 10 + length).standard_normal((batch, length, 64), dtype=np.float32)
    y = run(x=x)["y"]
    reference = decoder_reference.numpy_forward(params, x)
    assert y.shape == (batch, length, 64)
    np.testing.assert_allclose(y, reference, rtol=0, atol=tolerance(reference))


def test_a_later_token_does_not_change_earlier_outputs(block):
    """The causal mask: changing token 3 leaves positions 0-2 bit for bit as they were, and
    changes every position from 3 on."""
    run, _ = block
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 6, 64), dtype=np.float32)
    y = run(x=x)["y"]
    changed = x.copy()
    changed[:, 3] = rng.standard_normal((2, 64), dtype=np.float32)
    y_changed = run(x=changed)["y"]
    np.testing.assert_array_equal(y_changed[:, :3], y[:, :3])
    assert np.all(np.abs(y_changed[:, 3:] - y[:, 3:]).max(axis=2) > 1e-3)


def test_reference_matches_pytorch():
    """The NumPy reference against the block written in PyTorch (skipped without PyTorch): both
    are checked against the same function, so a mistake shared by kiln's program and the
    reference would show here."""
    torch = pytest.importorskip("torch", reason="PyTorch is absent from this Python")
    params = decoder_reference.random_parameters(seed=4, scale=0.2)
    x = np.random.default_rng(5).standard_normal((2, 7, 64), dtype=np.float32)
    reference = decoder_reference.numpy_forward(params, x)
    got = decoder_reference.torch_block(torch, params)(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, reference, rtol=0, atol=tolerance(reference))


def run_script(*args):
    return subprocess.run([sys.executable, str(EXAMPLE / "run_decoder.py"), *args], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))


def test_script_checks_and_times_both_batches():
    result = run_script("--device", DEVICE, "--batches", "1,2", "--length", "4", "--runs", "2")
    assert result.returncode == 0, result.stderr
    for batch in (1, 2):
        assert f"B = {batch}, T = 4: max |kiln - peer| " in result.stdout
    assert result.stdout.count(": agree") == 2
    assert result.stdout.count("forward pass, median of 2: kiln ") == 2


def test_script_refuses_a_bad_option():
    result = run_script("--length", "0")
    assert result.returncode != 0
    assert "--length" in result.stderr
