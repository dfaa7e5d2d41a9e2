"""examples/python/train_moons.py runs, and agrees with the C++ demo it mirrors.

The script is run as a user would run it: a subprocess of this interpreter, with this
environment (so the PYTHONPATH that finds kiln). Set KILN_TRAIN_MOONS_BINARY to the C++ demo
(build/examples/train_moons/train_moons) to compare the two runs' results, and to run the C++
demo's own checks here as well (ctest sets it).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "python" / "train_moons.py"
# Enough epochs to pass the demo's own 95% accuracy check (it exits 1 below it), still fast:
# compiling dominates, the epochs take milliseconds.
EPOCHS = 20
TIMEOUT_S = 60

EPOCH_LINE = re.compile(r"^epoch +(\d+)/(\d+)  loss (\d+\.\d{4})  accuracy +(\d+\.\d)%$", re.M)
# The one accuracy after training: the trained MLP's on every point.
SUMMARY_LINE = re.compile(
    r"^accuracy (\d+\.\d)%, [\d.]+ ms per epoch \((\d+) streams; the trained MLP on all 10000 points\)$", re.M)


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                            env=dict(os.environ))
    assert result.returncode == 0, (
        f"{command} exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result.stdout


def final_results(stdout):
    """The last epoch's (epoch, loss, accuracy) and the summary's accuracy."""
    epochs = EPOCH_LINE.findall(stdout)
    summary = SUMMARY_LINE.search(stdout)
    assert epochs and summary, f"no epoch or accuracy line in:\n{stdout}"
    epoch, total, loss, accuracy = epochs[-1]
    return int(epoch), int(total), float(loss), accuracy, summary.group(1)


def test_script_trains():
    out = run([sys.executable, str(SCRIPT), "--epochs", str(EPOCHS)])
    epoch, total, _, _, summary_accuracy = final_results(out)
    assert (epoch, total) == (EPOCHS, EPOCHS)
    assert float(summary_accuracy) >= 95.0, out


def demos():
    """The Python script, and the C++ demo where KILN_TRAIN_MOONS_BINARY names it."""
    found = [[sys.executable, str(SCRIPT)]]
    binary = os.environ.get("KILN_TRAIN_MOONS_BINARY")
    if binary and Path(binary).is_file():
        found.append([binary])
    return found


def test_a_shortened_run_reports_one_accuracy_and_succeeds():
    """`--epochs 3` is the user's choice, not a failure of the demo: exit status 0 whatever the
    accuracy (the 95% check is the default run's), one accuracy after training, and into a pipe
    one line per epoch (a tenth of 3 epochs is less than one), none of them redrawn with \\r."""
    for demo in demos():
        # Bytes, not text: text mode would read a \\r as a newline.
        result = subprocess.run(demo + ["--epochs", "3"], capture_output=True, timeout=TIMEOUT_S, env=dict(os.environ))
        assert result.returncode == 0, f"{demo} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
        assert b"\r" not in result.stdout, f"{demo}: {result.stdout!r}"
        out = result.stdout.decode()
        assert [int(e[0]) for e in EPOCH_LINE.findall(out)] == [1, 2, 3], f"{demo}:\n{out}"
        assert len(SUMMARY_LINE.findall(out)) == 1, f"{demo}:\n{out}"
        assert len(re.findall(r"^accuracy", out, re.M)) == 1, f"{demo}:\n{out}"


def test_bad_option_fails_with_a_message():
    result = subprocess.run([sys.executable, str(SCRIPT), "--streams", "0"], capture_output=True,
                            text=True, timeout=TIMEOUT_S, env=dict(os.environ))
    assert result.returncode != 0
    assert "--streams" in result.stderr


@pytest.mark.parametrize("streams", [1, 2])
def test_matches_cpp_demo(streams):
    binary = os.environ.get("KILN_TRAIN_MOONS_BINARY")
    if not binary or not Path(binary).is_file():
        pytest.skip("KILN_TRAIN_MOONS_BINARY does not name the C++ train_moons demo")
    args = ["--epochs", str(EPOCHS), "--streams", str(streams)]
    cpp = final_results(run([binary, *args]))
    py = final_results(run([sys.executable, str(SCRIPT), *args]))
    # Same program, data and step order: the same accuracy. The loss is allowed one unit in its
    # last printed digit, should a rebuild ever sum in another order.
    assert py[3:] == cpp[3:], f"accuracy: Python {py[3:]}, C++ {cpp[3:]}"
    assert py[2] == pytest.approx(cpp[2], abs=1.5e-4), f"loss: Python {py[2]}, C++ {cpp[2]}"
