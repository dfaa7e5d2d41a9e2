"""The one-call API: Program, CompiledProgram, errors, inputs kiln accepts and refuses."""

import threading

import kiln
import numpy as np
import pytest
from conftest import AFFINE


def test_version_and_devices():
    assert isinstance(kiln.__version__, str) and kiln.__version__.count(".") == 2
    devices = kiln.devices()
    assert "cpu" in devices and "interp" in devices
    assert all(isinstance(d, str) for d in devices)


def test_devices_leaves_out_what_a_malformed_setting_breaks():
    # In a fresh interpreter, since the list is made once per process.
    import os
    import subprocess
    import sys

    env = dict(os.environ, KILN_CPU_THREADS="abc")
    out = subprocess.run([sys.executable, "-c", "import kiln; print(kiln.devices())"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "'cpu'" not in out.stdout and "'interp'" not in out.stdout, out.stdout


def test_program_from_text_and_file(tmp_path):
    prog = kiln.Program.from_text(AFFINE)
    assert prog.routines == ["main", "double_w"]
    assert prog.tensors["x"] == ("input", "float32", (4, 10))
    assert prog.tensors["w"] == ("param", "float32", (10,))
    path = tmp_path / "affine.kiln"
    path.write_text(AFFINE)
    assert kiln.Program.from_file(str(path)).routines == prog.routines
    with pytest.raises(FileNotFoundError):
        kiln.Program.from_file(str(tmp_path / "missing.kiln"))


def test_program_error_lists_every_diagnostic():
    text = "input x : f32[4]\ny[i] = x[i]\nz[i] = x[q]\n"
    with pytest.raises(kiln.ProgramError) as caught:
        kiln.Program.from_text(text, "bad.kiln")
    assert isinstance(caught.value, kiln.Error)
    message = str(caught.value)
    assert "bad.kiln:2:1: error:" in message
    assert "bad.kiln:3:" in message


def test_run_main_and_named_routine(device):
    run = kiln.Program.from_text(AFFINE).compile(device=device)
    assert run.device == device
    x = np.arange(40, dtype=np.float32).reshape(4, 10)
    out = run(x=x)
    assert list(out) == ["y"]
    np.testing.assert_array_equal(out["y"], x + 1)
    assert run("double_w") == {}
    np.testing.assert_array_equal(run.get("w"), np.full(10, 2, np.float32))
    np.testing.assert_array_equal(run(x=x)["y"], 2 * x + 1)


def test_set_and_get_params(device):
    run = kiln.Program.from_text(AFFINE).compile(device=device)
    w = np.linspace(-1, 1, 10, dtype=np.float32)
    run.set("w", w)
    np.testing.assert_array_equal(run.get("w"), w)
    np.testing.assert_array_equal(run(x=np.ones((4, 10), np.float32))["y"][2], w + 1)
    run.set("w", [3] * 10)  # Python numbers take the tensor's dtype
    np.testing.assert_array_equal(run.get("w"), np.full(10, 3, np.float32))


def test_outputs_are_new_arrays_each_call():
    run = kiln.Program.from_text(AFFINE).compile()
    first = run(x=np.zeros((4, 10), np.float32))["y"]
    second = run(x=np.ones((4, 10), np.float32))["y"]
    assert first[0, 0] == 1 and second[0, 0] == 2


def test_wrong_inputs_raise_value_error_naming_the_tensor():
    run = kiln.Program.from_text(AFFINE).compile()
    with pytest.raises(ValueError, match=r"tensor 'x': expects float32\[4, 10\], got float32\[4, 9\]"):
        run(x=np.ones((4, 9), np.float32))
    with pytest.raises(ValueError, match=r"tensor 'x': expects float32\[4, 10\], got float64\[4, 10\]"):
        run(x=np.ones((4, 10)))
    with pytest.raises(ValueError, match=r"no tensor 'nope' in the program \(tensors: w, x, y\)"):
        run(nope=np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"no tensor 'nope'"):
        run.get("nope")
    with pytest.raises(ValueError, match=r"no routine 'train' in the program \(routines: double_w, main\)"):
        run("train")
    with pytest.raises(ValueError, match=r"tensor 'y' is an output"):
        run.set("y", np.ones((4, 10), np.float32))
    with pytest.raises(TypeError, match=r"tensor 'x': expects an array of float32\[4, 10\], got a str"):
        run(x="ones")
    # Nothing was half-written: the params are as they were.
    np.testing.assert_array_equal(run.get("w"), np.ones(10, np.float32))


def test_non_contiguous_arrays_are_copied_not_misread(device):
    run = kiln.Program.from_text(AFFINE).compile(device=device)
    base = np.arange(80, dtype=np.float32).reshape(8, 10)
    for x in (base[::2], np.asfortranarray(base[:4]), base.T.copy().T[:4], base[:4, ::-1]):
        np.testing.assert_array_equal(run(x=x)["y"], np.ascontiguousarray(x) + 1)


def test_failure_while_compiling_raises_kiln_error():
    prog = kiln.Program.from_text("input x : f32[4]\noutput y : f32[4]\ncall no_such_function(x) -> y\n")
    with pytest.raises(kiln.Error, match="no_such_function"):
        prog.compile(device="cpu")
    with pytest.raises(kiln.Error, match="nosuchdevice"):
        kiln.Program.from_text(AFFINE).compile(device="nosuchdevice")


def test_runs_release_the_gil():
    # A routine long enough to notice: the main thread keeps running Python while it runs.
    prog = kiln.Program.from_text(
        "input a : f32[384, 384]\ninput b : f32[384, 384]\noutput c : f32[384, 384]\n"
        "c[i, j] = sum(a[i, k] * b[k, j] * a[j, k])\n")
    run = prog.compile(device="cpu")
    a = np.ones((384, 384), np.float32)
    started = threading.Event()
    done = threading.Event()

    def work():
        started.set()
        for _ in range(3):
            run(a=a, b=a)
        done.set()

    thread = threading.Thread(target=work)
    thread.start()
    started.wait()
    spins = 0
    while not done.is_set():
        spins += 1
    thread.join()
    # Holding the GIL for the runs would leave this thread a handful of switches at most.
    assert spins > 10000
    assert run(a=a, b=a)["c"][0, 0] == 384


def test_closed_compiled_program():
    x = np.ones((4, 10), np.float32)
    with kiln.Program.from_text(AFFINE).compile() as run:
        view = run.tensor("y").numpy()
        run(x=x)
    for call in (lambda: run(x=x), lambda: run.get("y"), lambda: run.set("w", x[0]), lambda: run.tensor("y")):
        with pytest.raises(kiln.Error, match="closed"):
            call()
    np.testing.assert_array_equal(view, x + 1)  # a view outlives the program's closing


def test_setting_a_const_is_refused(device):
    # A const is compiled into the code that reads it: setting it from the host would change
    # what get() returns and nothing the routines compute, so it is refused, by name.
    prog = kiln.Program.from_text(
        "const lr : f32 = 0.1\ninput x : f32[4]\noutput y : f32[4]\ny[i] = x[i] * lr\n")
    run = prog.compile(device=device)
    x = np.arange(4, dtype=np.float32)
    for attempt in (lambda: run.set("lr", 0.5), lambda: run(x=x, lr=0.7)):
        with pytest.raises(kiln.Error, match="'lr' is a const.*declare it as a param"):
            attempt()
    np.testing.assert_allclose(run(x=x)["y"], x * np.float32(0.1), rtol=1e-6)
    assert run.get("lr") == pytest.approx(0.1)


def test_running_without_an_input_the_routine_reads_raises(device):
    prog = kiln.Program.from_text("input x : f32[4]\ninput u : f32[4]\noutput y : f32[4]\ny[i] = x[i] + u[i]\n")
    run = prog.compile(device=device)
    with pytest.raises(kiln.Error, match="input 'u' was never given a value.*'main' reads it"):
        run(x=np.ones(4, np.float32))
    # Once given, an input keeps its value for later runs, as a param does.
    np.testing.assert_array_equal(run(x=np.ones(4, np.float32), u=np.full(4, 2, np.float32))["y"], 3)
    np.testing.assert_array_equal(run(x=np.zeros(4, np.float32))["y"], 2)


SIZED = """
size N
input  x : f32[N, 3]
input  w : f32[N]
output y : f32[N, 3]
output total : f32[N + 1]
y[i, j] = x[i, j] * w[i]
total[i] = f32(i) * f32(N) where i < N + 1
"""


def test_a_program_with_sizes_runs_at_every_batch_size(device):
    prog = kiln.Program.from_text(SIZED)
    assert prog.sizes == ["N"]
    assert prog.tensors["x"] == ("input", "float32", ("N", 3))
    assert prog.tensors["total"] == ("output", "float32", ("N + 1",))
    run = prog.compile(device=device)
    assert run.sizes == {"N": None}
    rng = np.random.default_rng(5)
    for n in [37, 64, 1, 0, 1000, 3]:
        x = rng.standard_normal((n, 3)).astype(np.float32)
        w = rng.standard_normal(n).astype(np.float32)
        out = run(x=x, w=w)
        assert run.sizes == {"N": n}
        assert out["y"].shape == (n, 3) and out["total"].shape == (n + 1,)
        np.testing.assert_allclose(out["y"], x * w[:, None], rtol=1e-6)
        np.testing.assert_array_equal(out["total"], np.arange(n + 1, dtype=np.float32) * n)
        assert run.get("y").shape == (n, 3)


def test_sizes_that_disagree_raise_value_error_and_lose_nothing():
    run = kiln.Program.from_text(SIZED).compile(device="cpu")
    x = np.ones((4, 3), np.float32)
    good = run(x=x, w=np.full(4, 2, np.float32))
    with pytest.raises(ValueError, match="dimension 0 of tensor 'w' is size N, which is 5"):
        run(x=np.ones((5, 3), np.float32), w=np.ones(6, np.float32))
    with pytest.raises(ValueError, match="dimension 1 of tensor 'x' is 3, but the data has 4"):
        run(x=np.ones((5, 4), np.float32))
    with pytest.raises(ValueError, match="tensor 'x'"):
        run(x=np.ones(5, np.float32))
    # The last run's outputs are still there, and the next good run works.
    np.testing.assert_array_equal(run.get("y"), good["y"])
    assert run.sizes == {"N": 4}
    again = run(x=x, w=np.full(4, 2, np.float32))
    np.testing.assert_array_equal(again["y"], good["y"])


def test_tensors_bind_sizes_for_the_runtime():
    prog = kiln.Program.from_text(SIZED)
    tensors = kiln.Tensors(prog)
    assert tensors.sizes == {"N": None}
    tensors.set_sizes(N=6)
    assert tensors.sizes == {"N": 6}
    assert tensors.get("y").shape == (6, 3)
    with pytest.raises(ValueError, match="no such size"):
        tensors.set_sizes(M=2)
    with pytest.raises(ValueError, match="0 or more"):
        tensors.set_sizes(N=-1)


LANGUAGE_V2 = """
size B
input  z : f32[B, 5]
input  lab : i32[B]
output pick : f32[B]
output loss : f32
output p : f32[B, 5]
pick[n] = z[n, lab[n]]
loss = sum(max(z[n, m]) + log(sum(exp(z[n, c] - max(z[n, m])))) - z[n, lab[n]])
p[n, k] = exp(z[n, k] - max(z[n, m])) / sum(exp(z[n, c] - max(z[n, m])))
"""


@pytest.mark.parametrize("device", ["cpu", "interp"])
def test_gathers_and_reductions_inside_expressions_as_numpy(device):
    # Language version 2 from Python: a label picked per row (out of range reads 0), a softmax and
    # a cross-entropy each in one statement, against NumPy.
    prog = kiln.Program.from_text(LANGUAGE_V2)
    assert prog.tensors["p__max1"][0] == "tensor"  # the temporaries are listed
    run = prog.compile(device=device)
    rng = np.random.default_rng(3)
    z = rng.standard_normal((6, 5)).astype(np.float32)
    lab = np.array([0, 4, 2, -1, 5, 3], np.int32)
    out = run(z=z, lab=lab)
    inside = (lab >= 0) & (lab < 5)
    want_pick = np.where(inside, np.take_along_axis(z, np.clip(lab, 0, 4)[:, None], 1)[:, 0], 0)
    np.testing.assert_array_equal(out["pick"], want_pick)
    e = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(out["p"], e / e.sum(1, keepdims=True), rtol=1e-5)
    # In a reduction, a point whose gathered position is out of range contributes nothing: the
    # rows with labels -1 and 5 are left out of the sum as a whole.
    want_loss = (z.max(1) + np.log(e.sum(1)) - want_pick)[inside].sum()
    np.testing.assert_allclose(out["loss"], want_loss, rtol=1e-5)


def test_large_outputs_are_new_arrays_with_each_runs_values(device):
    # Outputs of 64 KiB or more come straight from the device's array where it is host memory,
    # and through the host copy elsewhere; either way each run returns its own new array, and a
    # view of the output taken meanwhile stays what the device holds.
    run = kiln.Program.from_text("size N\ninput x : f32[N, 1024]\noutput y : f32[N, 1024]\n"
                                 "y[i, j] = x[i, j] * 2 + 1\n").compile(device=device)
    rng = np.random.default_rng(1)
    previous = None
    for rows in (64, 3, 300, 64):
        x = rng.standard_normal((rows, 1024), dtype=np.float32)
        y = run(x=x)["y"]
        assert y.shape == (rows, 1024)
        np.testing.assert_array_equal(y, x * 2 + 1)
        if previous is not None:
            np.testing.assert_array_equal(previous[1], previous[0] * 2 + 1)  # an earlier result stays
        previous = (x, y)
    view = run.tensor("y").numpy()
    x = rng.standard_normal((64, 1024), dtype=np.float32)
    y = run(x=x)["y"]
    np.testing.assert_array_equal(y, x * 2 + 1)
    if device != "opencl":  # a view of host memory sees the run; OpenCL's numpy() is a copy
        np.testing.assert_array_equal(view, y)


def test_check_bounds_raises_naming_the_gather(device):
    # compile(check_bounds=True): an embedding index outside the table fails the run, naming the
    # statement's line, the tensor and the index; without it, the row reads 0.
    text = "input e : f32[5, 3]\ninput t : i32[4]\noutput y : f32[4, 3]\ny[i, j] = e[t[i], j]\n"
    e = np.arange(15, dtype=np.float32).reshape(5, 3)
    t = np.array([0, 4, 7, 1], np.int32)
    out = kiln.Program.from_text(text).compile(device=device)(e=e, t=t)
    np.testing.assert_array_equal(out["y"], np.stack([e[0], e[4], np.zeros(3, np.float32), e[1]]))
    checked = kiln.Program.from_text(text).compile(device=device, check_bounds=True)
    np.testing.assert_array_equal(checked(e=e, t=np.array([0, 4, 2, 1], np.int32))["y"], e[[0, 4, 2, 1]])
    with pytest.raises(kiln.Error, match=r":4: index out of range: dimension 0 of 'e' has size 5, .* reads index 7"):
        checked(e=e, t=t)


def test_compile_copies_param_values_unless_asked_to_share_them(host_device):
    """compile() starts each param from a copy of its value, so that a routine that writes it
    leaves the program's array as it was; share_params=True binds the array itself (cpu,
    interp): the routine's writes land in it, and the weights are held once."""
    for share in (False, True):
        program = kiln.Program.from_text(AFFINE)
        w = np.arange(10, dtype=np.float32)
        program.set_param_value("w", w)
        run = program.compile(device=host_device, share_params=share)
        run("double_w")
        np.testing.assert_array_equal(run.get("w"), np.arange(10, dtype=np.float32) * 2)
        np.testing.assert_array_equal(w, np.arange(10, dtype=np.float32) * (2 if share else 1))
        np.testing.assert_array_equal(program.param_values["w"], w)
