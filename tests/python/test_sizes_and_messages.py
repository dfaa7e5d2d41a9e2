"""Sizes given by name, and what the package says when a call is wrong (docs/python.md)."""

import kiln
import numpy as np
import pytest

SIZE_NO_INPUT_NAMES = """\
size K
input  x : f32[4]
output ramp : f32[K]
output total : f32[]
ramp[k] = f32(k) + x[0]
total = sum(x[i])
routine only_ramp {
  ramp[k] = f32(k) * 2
}
"""


def test_a_size_no_input_names_is_given_by_name(device):
    run = kiln.Program.from_text(SIZE_NO_INPUT_NAMES).compile(device=device)
    out = run(x=np.ones(4, np.float32), sizes={"K": 3})
    np.testing.assert_array_equal(out["ramp"], [1, 2, 3])
    assert out["total"] == 4
    assert run.sizes == {"K": 3}
    # A later call at another value, and a routine with no inputs at all.
    np.testing.assert_array_equal(run("only_ramp", sizes={"K": 5})["ramp"], [0, 2, 4, 6, 8])
    # Once bound, later runs keep it.
    assert run("only_ramp")["ramp"].shape == (5,)


def test_a_size_left_unbound_says_how_to_give_it():
    run = kiln.Program.from_text(SIZE_NO_INPUT_NAMES).compile()
    with pytest.raises(ValueError, match=r"routine 'only_ramp' needs size K, which no input has bound: .*sizes=\{\"K\": \.\.\.\}"):
        run("only_ramp")
    with pytest.raises(ValueError, match=r"sizes: the program declares no size 'k' \(its sizes: K\)"):
        run("only_ramp", sizes={"k": 3})
    with pytest.raises(ValueError, match=r"size K = -1: a size is 0 or more"):
        run("only_ramp", sizes={"K": -1})
    with pytest.raises(TypeError, match=r"size K must be an int, got a float"):
        run("only_ramp", sizes={"K": 2.5})
    assert run.sizes == {"K": None}  # nothing was bound by the calls that failed


def test_sizes_given_and_an_input_that_disagrees_change_nothing():
    run = kiln.Program.from_text("size N\ninput x : f32[N]\noutput y : f32[N]\ny[i] = x[i] * 2\n").compile()
    np.testing.assert_array_equal(run(x=np.ones(3, np.float32))["y"], [2, 2, 2])
    with pytest.raises(ValueError, match=r"dimension 0 of tensor 'x' is size N, which is given as 4, but the data has 2"):
        run(x=np.ones(2, np.float32), sizes={"N": 4})
    assert run.sizes == {"N": 3}
    np.testing.assert_array_equal(run(x=np.ones(2, np.float32), sizes={"N": 2})["y"], [2, 2])


def test_a_tensor_named_sizes_is_still_a_tensor():
    run = kiln.Program.from_text("input sizes : f32[2]\noutput y : f32[2]\ny[i] = sizes[i] + 1\n").compile()
    np.testing.assert_array_equal(run(sizes=np.array([1, 2], np.float32))["y"], [2, 3])


def test_a_routine_that_touches_no_sized_tensor_runs_with_sizes_unbound(device):
    run = kiln.Program.from_text(
        "size N\ninput x : f32[N]\nparam w : f32[3] = 1\noutput t : f32[]\n"
        "routine scale {\n  w[i] = w[i] * 2\n}\nroutine total {\n  t = sum(x[i])\n}\n").compile(device=device)
    run("scale")
    np.testing.assert_array_equal(run.get("w"), [2, 2, 2])
    assert run.sizes == {"N": None}
    assert run("total", x=np.ones(5, np.float32))["t"] == 5


def test_expected_shapes_are_written_as_declared():
    run = kiln.Program.from_text(
        "size B\nsize T\ninput tok : i32[B, T]\noutput y : f32[B, T]\ny[b, t] = f32(tok[b, t])\n").compile()
    with pytest.raises(ValueError, match=r"tensor 'tok': expects int32\[B, T\], got float32\[2, 3\]"):
        run(tok=np.ones((2, 3), np.float32))
    run(tok=np.ones((2, 3), np.int32))  # the last run's shape is not what is expected either
    with pytest.raises(ValueError, match=r"tensor 'tok': expects int32\[B, T\], got int64\[4\]"):
        run(tok=np.ones(4, np.int64))
    # An int64 array (NumPy's default integer) for an i32 tensor says how to convert it.
    with pytest.raises(ValueError, match=r"got int64\[2, 3\]; convert it: a\.astype\(numpy\.int32\)"):
        run(tok=np.ones((2, 3), np.int64))


def test_misspelt_names_get_a_suggestion_among_the_programs_own():
    run = kiln.Program.from_text(
        "input x : f32[4, 3]\noutput lse : f32[4]\n"
        "lse[i] = log(sum(exp(x[i, j] - max(x[i, k])))) + max(x[i, k])\n").compile()
    assert any("__" in name for name in kiln.Program.from_text(
        "input x : f32[4, 3]\noutput lse : f32[4]\nlse[i] = log(sum(exp(x[i, j] - max(x[i, k])))) + max(x[i, k])\n"
    ).tensors), "the program should have a compiler temporary for this test to mean anything"
    with pytest.raises(ValueError) as error:
        run.get("lsee")
    message = str(error.value)
    assert "did you mean 'lse'?" in message
    assert "__" not in message, message  # compiler temporaries are not the program's names
    with pytest.raises(ValueError, match=r"no routine 'mian' .*did you mean 'main'\?"):
        run("mian")


@pytest.mark.parametrize("name", ["bad name!", "9abc", "x-y", "", "a__b", "_x"])
def test_register_call_refuses_names_no_program_can_call(name):
    with pytest.raises(ValueError, match=r"not a name a program can call"):
        kiln.register_call(name, lambda *a: None)


def test_an_allocation_that_fails_is_a_kiln_error_naming_the_tensor():
    # 2^20 x 2^20 f32 is 4 TiB: more than any machine that runs these tests has.
    run = kiln.Program.from_text(
        "size N\ninput x : f32[N]\noutput outer : f32[N, N]\nouter[i, j] = x[i] * x[j]\n").compile()
    with pytest.raises(kiln.Error, match=r"RESOURCE_EXHAUSTED: .*tensor 'outer': .*4398046511104 bytes"):
        run(x=np.ones(1 << 20, np.float32))
    # Nothing changed, and the next call works.
    assert run.sizes == {"N": None}
    np.testing.assert_array_equal(run(x=np.array([1, 2], np.float32))["outer"], [[1, 2], [2, 4]])
