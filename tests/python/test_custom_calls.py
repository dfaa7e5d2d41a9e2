"""Custom calls written in Python (kiln.register_call): values, in-place outputs, dtypes, sizes,
errors, registration rules, and the GIL (waits that would deadlock if they held it)."""

import itertools
import os
import subprocess
import sys
import textwrap

import kiln
import numpy as np
import pytest

_ids = itertools.count()


def unique(name):
    """Registrations last for the process: each test registers names of its own."""
    return f"{name}_{next(_ids)}"


def scale_program(name, dtype="f32", shape="4, 3", sizes=""):
    return kiln.Program.from_text(f"""
{sizes}
input x : {dtype}[{shape}]
output y : {dtype}[{shape}]
call {name}(x, factor=2) -> y
""")


def test_the_contract_example(device):
    def scale_rows(x, y, *, factor):
        y[...] = x * factor

    name = unique("scale_rows")
    kiln.register_call(name, scale_rows)
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = scale_program(name).compile(device=device)(x=a)["y"]
    np.testing.assert_array_equal(y, a * 2)


def test_arguments_are_read_only_views_outputs_writable_attributes_floats(device):
    seen = {}

    def look(x, y, *, factor):
        seen.update(x_writeable=x.flags.writeable, y_writeable=y.flags.writeable, factor=factor,
                    shapes=(x.shape, y.shape), dtypes=(x.dtype, y.dtype),
                    y_address=y.__array_interface__["data"][0])
        y[...] = x + factor

    name = unique("look")
    kiln.register_call(name, look)
    run = scale_program(name).compile(device=device)
    a = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(run(x=a)["y"], a + 2)
    assert seen["x_writeable"] is False and seen["y_writeable"] is True
    assert type(seen["factor"]) is float and seen["factor"] == 2.0
    assert seen["shapes"] == ((4, 3), (4, 3)) and seen["dtypes"] == (np.float32, np.float32)
    if device in ("cpu", "interp"):
        # The device's memory is the host's: the function wrote the output array itself.
        view = run.tensor("y").numpy()
        assert view.__array_interface__["data"][0] == seen["y_address"]


def test_writing_an_argument_fails_the_call(device):
    def writes_x(x, y, *, factor):
        x[0, 0] = factor

    name = unique("writes_x")
    kiln.register_call(name, writes_x)
    with pytest.raises(kiln.Error, match="ValueError: assignment destination is read-only"):
        scale_program(name).compile(device=device)(x=np.ones((4, 3), np.float32))


def test_in_place_outputs_between_statements(device):
    # The call's output is an intermediate that the next statement reads, its argument one that
    # the statement before writes: the call runs between them, on the device's own memory.
    def affine(u, t, *, scale, shift):
        np.multiply(u, scale, out=t)
        t += shift

    name = unique("affine")
    kiln.register_call(name, affine)
    prog = kiln.Program.from_text(f"""
input x : f32[5, 2]
tensor u : f32[5, 2]
tensor t : f32[5, 2]
output y : f32[5, 2]
u[i, j] = x[i, j] + 1
call {name}(u, scale=3, shift=0.5) -> t
y[i, j] = t[i, j] * 2
""")
    run = prog.compile(device=device)
    for k in range(3):  # replays use the same memory
        x = np.arange(10, dtype=np.float32).reshape(5, 2) + k
        np.testing.assert_array_equal(run(x=x)["y"], ((x + 1) * 3 + 0.5) * 2)


def test_several_arguments_and_outputs(device):
    calls = []

    def combine(a, b, s, d, *, scale, shift):
        calls.append((a.shape, b.shape, s.shape, d.shape, scale, shift))
        s[...] = a * scale + b[None, :] + shift
        d[...] = (a - b[None, :]).sum(axis=1)

    name = unique("combine")
    kiln.register_call(name, combine)
    prog = kiln.Program.from_text(f"""
input a : f64[3, 4]
input b : f64[4]
output s : f64[3, 4]
output d : f64[3]
call {name}(a, b, scale=-1.5, shift=0.25) -> s, d
""")
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    b = np.array([1, 2, 3, 4], np.float64)
    out = prog.compile(device=device)(a=a, b=b)
    np.testing.assert_array_equal(out["s"], a * -1.5 + b + 0.25)
    np.testing.assert_array_equal(out["d"], (a - b).sum(axis=1))
    assert calls == [((3, 4), (4,), (3, 4), (3,), -1.5, 0.25)]


@pytest.mark.parametrize("dtype,numpy_dtype", [("f32", np.float32), ("f64", np.float64), ("i32", np.int32)])
def test_dtypes(device, dtype, numpy_dtype):
    def twice(x, y, *, factor):
        assert x.dtype == numpy_dtype and y.dtype == numpy_dtype, (x.dtype, y.dtype)
        y[...] = x * int(factor)

    name = unique("twice")
    kiln.register_call(name, twice)
    x = (np.arange(12) - 5).astype(numpy_dtype).reshape(4, 3)
    y = scale_program(name, dtype).compile(device=device)(x=x)["y"]
    assert y.dtype == numpy_dtype
    np.testing.assert_array_equal(y, x * 2)


def test_a_program_with_sizes(device):
    shapes = []

    def scale_rows(x, y, *, factor):
        shapes.append(x.shape)
        y[...] = x * factor

    name = unique("scale_sized")
    kiln.register_call(name, scale_rows)
    run = scale_program(name, shape="N, 3", sizes="size N").compile(device=device)
    for n in [5, 1, 0, 17]:
        x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        y = run(x=x)["y"]
        assert y.shape == (n, 3)
        np.testing.assert_array_equal(y, x * 2)
    assert shapes == [(5, 3), (1, 3), (0, 3), (17, 3)]


def test_an_exception_fails_the_run_and_later_runs_work(device):
    def fails(x, y, *, factor):
        if factor > 1:
            raise ArithmeticError(f"factor {factor} is too large")
        y[...] = x * factor

    name = unique("fails")
    kiln.register_call(name, fails)
    x = np.ones((4, 3), np.float32)
    halves = kiln.Program.from_text(f"""
input x : f32[4, 3]
output y : f32[4, 3]
call {name}(x, factor=0.5) -> y
""")
    before = halves.compile(device=device)
    run = scale_program(name).compile(device=device)
    with pytest.raises(kiln.Error) as caught:
        run(x=x)
    message = str(caught.value)
    for part in (f"'{name}'", f"device '{device}'", "ArithmeticError: factor 2.0 is too large",
                 "test_custom_calls.py"):
        assert part in message, message
    # The failure stays with that program's stream, as any failure does; other compiled programs
    # run, those compiled before and after, and so does the function.
    with pytest.raises(kiln.Error, match="ArithmeticError"):
        run(x=x)
    np.testing.assert_array_equal(before(x=x)["y"], x * 0.5)
    np.testing.assert_array_equal(halves.compile(device=device)(x=x)["y"], x * 0.5)


def test_a_returned_value_or_a_kept_array_fails_the_call():
    def returns(x, y, *, factor):
        return x * factor

    kept = []

    def keeps(x, y, *, factor):
        y[...] = x
        kept.append(y[1:])  # a view of kiln's memory, past the call

    for fn, expected in ((returns, "returned a ndarray; it writes its outputs in place"),
                         (keeps, "kept positional argument 1 \\(an output\\) or a view of it after returning")):
        name = unique(fn.__name__)
        kiln.register_call(name, fn)
        with pytest.raises(kiln.Error, match=expected):
            scale_program(name).compile(device="cpu")(x=np.ones((4, 3), np.float32))


def test_registering_twice_is_an_error():
    def f(x, y, *, factor):
        y[...] = x

    every, cpu, interp = unique("every"), unique("cpu_only"), unique("two_devices")
    kiln.register_call(every, f)
    with pytest.raises(kiln.Error, match=f"ALREADY_EXISTS: .*'{every}' is already registered for every device"):
        kiln.register_call(every, f)
    with pytest.raises(kiln.Error, match="already registered for every device"):
        kiln.register_call(every, f, device="cpu")
    kiln.register_call(cpu, f, device="cpu")
    with pytest.raises(kiln.Error, match="already registered for device 'cpu'"):
        kiln.register_call(cpu, f, device="cpu")
    with pytest.raises(kiln.Error, match="already registered for device 'cpu'"):
        kiln.register_call(cpu, f)
    # One name on two drivers is two registrations.
    kiln.register_call(interp, f, device="cpu")
    kiln.register_call(interp, f, device="interp")
    x = np.ones((4, 3), np.float32)
    for device in ("cpu", "interp"):
        np.testing.assert_array_equal(scale_program(interp).compile(device=device)(x=x)["y"], x)


def test_names_devices_and_callables_that_are_refused():
    def f(x, y):
        y[...] = x

    with pytest.raises(TypeError, match="must be callable"):
        kiln.register_call(unique("not_callable"), 42)
    with pytest.raises(ValueError, match="built-in function of the language"):
        kiln.register_call("sort", f)
    with pytest.raises(ValueError, match="not a name a program can call"):
        kiln.register_call("two__underscores", f)
    with pytest.raises(ValueError, match="device 'opencl:1' is not one of 'cpu'"):
        kiln.register_call(unique("device"), f, device="opencl:1")


def test_unregistered_names_and_other_devices_are_not_found():
    with pytest.raises(kiln.Error, match="NOT_FOUND: .*no function 'never_registered' is registered for device 'cpu'"):
        scale_program("never_registered").compile(device="cpu")

    def f(x, y, *, factor):
        y[...] = x

    name = unique("cpu_only")
    kiln.register_call(name, f, device="cpu")
    scale_program(name).compile(device="cpu")
    with pytest.raises(kiln.Error, match=f"NOT_FOUND: .*no function '{name}' is registered for device 'interp'"):
        scale_program(name).compile(device="interp")


def test_one_function_with_the_same_types_takes_one_set_of_attribute_names():
    # The attributes travel by position: the function made for f32[4, 3] -> f32[4, 3] with
    # `factor` cannot serve a call that names `scale`.
    def f(x, y, **attributes):
        y[...] = x * sum(attributes.values())

    name = unique("named")
    kiln.register_call(name, f)
    x = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(scale_program(name).compile(device="cpu")(x=x)["y"], x * 2)
    other = kiln.Program.from_text(f"input x : f32[4, 3]\noutput y : f32[4, 3]\ncall {name}(x, scale=3) -> y\n")
    with pytest.raises(kiln.Error, match="INVALID_ARGUMENT: .*attributes \\(factor\\), this one has .*attributes \\(scale\\)"):
        other.compile(device="cpu")
    # Other types, or another device, make another function.
    np.testing.assert_array_equal(other.compile(device="interp")(x=x)["y"], x * 3)
    f64 = kiln.Program.from_text(f"input x : f64[4, 3]\noutput y : f64[4, 3]\ncall {name}(x, scale=3) -> y\n")
    np.testing.assert_array_equal(f64.compile(device="cpu")(x=x.astype(np.float64))["y"], x * 3)


def run_script(script):
    """Runs `script` in a fresh interpreter; a deadlock shows as the timeout, not as a hung suite."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                         text=True, timeout=120)
    return out


# A call that can only finish once another Python thread ran, which waits for `go`: the main
# thread sets it just before a kiln wait. With a switch interval of 1000 s the main thread gives
# up the GIL only where it blocks, so a wait that held the GIL would never let that thread run.
GATED = """
import sys, threading, kiln, numpy as np
go, started, proceed = threading.Event(), threading.Event(), threading.Event()
calls = []
def gated(x, y):
    calls.append(x.shape)
    started.set()
    proceed.wait()
    y[...] = x + 1
def release():
    go.wait()
    proceed.set()
def gate():
    go.clear(); proceed.clear()
    thread = threading.Thread(target=release)
    thread.start()
    return thread
kiln.register_call("gated", gated)
prog = kiln.Program.from_text("input x : f32[8]\\noutput y : f32[8]\\ncall gated(x) -> y\\n")
backend = kiln.Backend("cpu")
stream = backend.new_stream()
tensors = kiln.Tensors(prog)
context = backend.context(stream, tensors).link(backend.compile(prog))
tensors.set("x", np.arange(8, dtype=np.float32))
sys.setswitchinterval(1000)
"""


def test_waits_for_a_routine_with_a_python_call_release_the_gil():
    out = run_script(GATED + """
# A host write waits for the copy back scheduled after the routine.
thread = gate()
context.routine("main").run()
kiln.to_host(context, "y")
go.set()
tensors.set("y", np.zeros(8, np.float32))
thread.join()
np.testing.assert_array_equal(tensors.get("y"), np.zeros(8, np.float32))

# Dropping the last handle of a backend waits for its streams.
thread = gate()
context.routine("main").run()
go.set()
del context, stream, backend
thread.join()
print("done")
""")
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stdout + out.stderr


def test_the_interpreter_exits_while_routines_with_python_calls_are_queued():
    # At exit, kiln's hook lets the call inside finish (an exit hook of the script's, which runs
    # first, lets it go on), then fails what has not run rather than enter a finalizing
    # interpreter; a hook registered before kiln's sees that.
    out = run_script("""
import atexit
atexit.register(lambda: after_kiln())
""" + GATED + """
routine = context.routine("main")
for _ in range(50):
    routine.run()
started.wait()
atexit.register(proceed.set)
def after_kiln():
    try:
        backend.wait()
    except kiln.Error as e:
        print("failed:", e)
    print("calls:", len(calls))
""")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the Python interpreter is exiting: Python function 'gated' was not called" in out.stdout, out.stdout
    assert "calls: 1" in out.stdout, out.stdout
    assert "Fatal" not in out.stderr and "leaked" not in out.stderr, out.stderr
