"""`kiln run` under mpirun (docs/cli.md, "Under mpirun"): real processes started by mpiexec with
2 and 4 ranks, each reading its own inputs through `{rank}` paths written here, writing its own
outputs through `{rank}`, checked against NumPy; the same program run alone (a world of one,
where every collective is a copy); --print from rank 0 only; a failed run that writes no
output file; faults between ranks (collectives in another order, a rank that never arrives,
one that ends early) that end the run with status 1 and a message, not a hang; and --streams,
refused (status 2) for routines with collectives, run for routines without.

The `kiln` binary: $KILN_BINARY (ctest sets it), else the one next to the build's python/
directory. Skipped only where mpiexec is absent or kiln was built without MPI.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln

from conftest import DEVICES, mpi_env

TIMEOUT_S = 240
MPIEXEC = shutil.which("mpiexec")


def kiln_binary():
    given = os.environ.get("KILN_BINARY")
    path = Path(given) if given else Path(kiln.__file__).parent.parent.parent / "kiln"
    if not path.is_file():
        pytest.skip(f"no kiln binary at {path} (set KILN_BINARY)")
    return str(path)


def needs_mpi():
    if MPIEXEC is None:
        pytest.skip("mpiexec is not installed")
    if not kiln.built_with_mpi():
        pytest.skip("this kiln was built without MPI")


def program(ranks):
    """Every collective, on f32, f64 and i32, and a statement that reads a collective's output."""
    return f"""\
input  x : f32[{ranks}, 3]
input  k : i32[4]
input  d : f64[2]
output sum : f32[{ranks}, 3]
output mean : f32[{ranks}, 3]
output top : f32[{ranks}, 3]
output low : f32[{ranks}, 3]
output all : f32[{ranks * ranks}, 3]
output part : f32[1, 3]
output part_max : f32[1, 3]
output keys : i32[4]
output dsum : f64[2]
output kmin : i32[4]
output kall : i32[{4 * ranks}]
output twice : f32[{ranks}, 3]
output r : i32
output n : i32
call allreduce(x) -> sum
call allreduce(x, op=1) -> mean
call allreduce(x, op=2) -> top
call allreduce(x, op=3) -> low
call allgather(x) -> all
call reduce_scatter(x) -> part
call reduce_scatter(x, op=2) -> part_max
call broadcast(k, root={ranks - 1}) -> keys
call allreduce(d) -> dsum
call allreduce(k, op=3) -> kmin
call allgather(k) -> kall
twice[i, j] = sum[i, j] * 2 + x[i, j]
call rank() -> r
call world_size() -> n
"""


OUTPUTS = ["sum", "mean", "top", "low", "all", "part", "part_max", "keys", "dsum", "kmin", "kall", "twice", "r", "n"]


def inputs_of(rank, ranks):
    """Rank `rank`'s inputs: small integers (exact in every dtype), different on every rank."""
    rng = np.random.default_rng(1000 * ranks + rank)
    return {
        "x": rng.integers(-20, 20, size=(ranks, 3)).astype(np.float32),
        "k": rng.integers(-50, 50, size=4).astype(np.int32),
        "d": rng.integers(-1000, 1000, size=2).astype(np.float64) / 8,
    }


def expected(rank, ranks):
    """What rank `rank` of `ranks` must get, from every rank's inputs."""
    every = [inputs_of(q, ranks) for q in range(ranks)]
    xs = np.stack([e["x"] for e in every])
    ks = np.stack([e["k"] for e in every])
    total = xs.sum(axis=0, dtype=np.float32)
    return {
        "sum": total,
        "mean": total / np.float32(ranks),
        "top": xs.max(axis=0),
        "low": xs.min(axis=0),
        "all": np.concatenate([e["x"] for e in every]),
        "part": total[rank : rank + 1],
        "part_max": xs.max(axis=0)[rank : rank + 1],
        "keys": every[ranks - 1]["k"],
        "dsum": np.stack([e["d"] for e in every]).sum(axis=0),
        "kmin": ks.min(axis=0),
        "kall": np.concatenate([e["k"] for e in every]),
        "twice": total * 2 + every[rank]["x"],
        "r": np.int32(rank),
        "n": np.int32(ranks),
    }


def write_inputs(directory, ranks):
    for q in range(ranks):
        for name, value in inputs_of(q, ranks).items():
            np.save(directory / f"{name}{q}.npy", value)


def run_args(directory, device, ranks, tag):
    """`kiln run` with {rank} inputs, {rank} outputs, one output without {rank}, and --print."""
    prog = directory / f"collectives{ranks}.kiln"
    prog.write_text(program(ranks))
    args = [kiln_binary(), "run", str(prog), "--device", device, "--print"]
    for name in ("x", "k", "d"):
        args += ["--input", f"{name}={directory}/{name}{{rank}}.npy"]
    for name in OUTPUTS:
        args += ["--output", f"{name}={directory}/{tag}_{name}_{{rank}}.npy"]
    return args + ["--output", f"n={directory}/{tag}_n_rank0_only.npy"]


def check_outputs(directory, tag, ranks):
    for q in range(ranks):
        want = expected(q, ranks)
        for name in OUTPUTS:
            got = np.load(directory / f"{tag}_{name}_{q}.npy")
            assert got.dtype == np.asarray(want[name]).dtype, (tag, q, name)
            np.testing.assert_allclose(got, want[name], rtol=1e-6, err_msg=f"{tag}: rank {q}'s {name}")
    assert int(np.load(directory / f"{tag}_n_rank0_only.npy")) == ranks
    # Rank by rank, nothing else: no file of a rank that is not there, no temporary left behind.
    written = sorted(p.name for p in directory.glob(f"{tag}_*"))
    assert len(written) == ranks * len(OUTPUTS) + 1, written
    assert not list(directory.glob(f".{tag}_*")), "a staged output was left behind"


def printed_listings(stdout):
    """How many times --print listed the outputs, and the value printed for r each time."""
    lines = stdout.splitlines()
    return [lines[i + 1].strip() for i, line in enumerate(lines) if line.startswith("r : i32")]


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("device", DEVICES)
def test_every_collective_under_mpirun(tmp_path, device, ranks):
    needs_mpi()
    write_inputs(tmp_path, ranks)
    args = [MPIEXEC, "-np", str(ranks), "--oversubscribe"] + run_args(tmp_path, device, ranks, device)
    result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=mpi_env())
    assert result.returncode == 0, result.stdout + result.stderr
    check_outputs(tmp_path, device, ranks)
    # --print comes from rank 0 alone: one listing, with rank 0's r.
    assert printed_listings(result.stdout) == ["0"], result.stdout


@pytest.mark.parametrize("device", DEVICES)
def test_alone_it_is_a_world_of_one(tmp_path, device):
    """No mpirun: rank 0 of 1, {rank} is 0, and every collective is a copy of its input."""
    write_inputs(tmp_path, 1)
    result = subprocess.run(run_args(tmp_path, device, 1, device), capture_output=True, text=True,
                            timeout=TIMEOUT_S, env=dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    check_outputs(tmp_path, device, 1)
    x, k = inputs_of(0, 1)["x"], inputs_of(0, 1)["k"]
    for name in ("sum", "mean", "top", "low", "all", "part", "part_max"):
        np.testing.assert_array_equal(np.load(tmp_path / f"{device}_{name}_0.npy"), x)
    np.testing.assert_array_equal(np.load(tmp_path / f"{device}_kall_0.npy"), k)
    assert printed_listings(result.stdout) == ["0"], result.stdout


def test_a_failed_run_writes_no_output(tmp_path):
    """A collective that fails on every rank (a broadcast from a rank that is not there): exit
    status 1, and neither the rank-0 output nor any rank's {rank} output is written."""
    needs_mpi()
    prog = tmp_path / "bad.kiln"
    prog.write_text("input x : f32[2]\noutput y : f32[2]\noutput z : f32[2]\n"
                    "z[i] = x[i] * 2\ncall broadcast(x, root=7) -> y\n")
    args = [MPIEXEC, "-np", "2", "--oversubscribe", kiln_binary(), "run", str(prog),
            "--output", f"z={tmp_path}/z.npy", "--output", f"y={tmp_path}/y{{rank}}.npy"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=mpi_env())
    assert result.returncode == 1, result.stdout + result.stderr
    assert "broadcast" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.kiln"]


def run_two_programs(tmp_path, first, second, timeout_s, second_options=()):
    """Rank 0 runs program `first`, rank 1 `second` (mpiexec's A : B form), each writing y{rank}."""
    for name, text in (("first.kiln", first), ("second.kiln", second)):
        (tmp_path / name).write_text(text)
    rank = lambda name: [kiln_binary(), "run", str(tmp_path / name), "--output", f"y={tmp_path}/y{{rank}}.npy"]
    args = ([MPIEXEC, "--oversubscribe", "-np", "1"] + rank("first.kiln") + [":", "-np", "1"] + rank("second.kiln") +
            list(second_options))
    env = dict(mpi_env(), KILN_COLLECTIVE_TIMEOUT=str(timeout_s))
    return subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)


PROGRAM_HEAD = "input x : f32[4]\ninput j : i32[3]\noutput y : f32[4]\noutput k : i32[3]\n"


def test_ranks_calling_collectives_in_another_order_fail_naming_both(tmp_path):
    """Rank 0 runs allreduce then broadcast, rank 1 broadcast then allreduce: both fail with a
    message naming both calls (not a hang, not mixed data), exit status 1, no file written."""
    needs_mpi()
    result = run_two_programs(tmp_path, PROGRAM_HEAD + "call allreduce(x) -> y\ncall broadcast(j) -> k\n",
                              PROGRAM_HEAD + "call broadcast(j) -> k\ncall allreduce(x) -> y\n", 60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ranks issued different collectives at the same point" in result.stderr, result.stderr
    assert ("rank 0 issued allreduce (sum) of 4 f32 at routine 'main', line 5, "
            "rank 1 issued broadcast (root 0) of 3 i32 at routine 'main', line 5") in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.kiln", "second.kiln"]


def test_a_rank_that_never_arrives_fails_the_others_within_the_timeout(tmp_path):
    """Rank 1 joins the job, then waits forever for its input (a FIFO nobody writes) while rank 0
    waits for it at its allreduce: rank 0 fails after KILN_COLLECTIVE_TIMEOUT naming the call,
    rank 1 and the timeout, exits with status 1 (which ends the job), and no file is written."""
    needs_mpi()
    fifo = tmp_path / "never_written"
    os.mkfifo(fifo)
    result = run_two_programs(tmp_path, PROGRAM_HEAD + "call allreduce(x) -> y\n", PROGRAM_HEAD + "y[i] = x[i] * 2\n",
                              2, ["--input", f"x={fifo}"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("allreduce (sum) of 4 f32 at routine 'main', line 5 (collective #1 of rank 0 of 2): "
            "rank 1 did not arrive within 2 s (KILN_COLLECTIVE_TIMEOUT)") in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.kiln", "never_written", "second.kiln"]


def test_a_rank_that_exits_early_fails_the_others_naming_both_calls(tmp_path):
    """Rank 1's program has one collective fewer: at its end it agrees on the outputs (kiln run's
    own collective) where rank 0 broadcasts, and both fail naming both calls; no file is written."""
    needs_mpi()
    result = run_two_programs(tmp_path, PROGRAM_HEAD + "call allreduce(x) -> y\ncall broadcast(j) -> k\n",
                              PROGRAM_HEAD + "call allreduce(x) -> y\n", 60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("rank 0 issued broadcast (root 0) of 3 i32 at routine 'main', line 6, rank 1 issued allreduce (min) of 1 "
            "i32 at kiln run: every rank's outputs staged") in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.kiln", "second.kiln"]


def test_streams_with_collectives_under_mpirun_is_a_usage_error(tmp_path):
    """`--streams 2` under mpirun, for a routine with a collective: the copies' collectives would
    run on 2 streams of each rank in no fixed order, so the ranks could combine one stream's call
    with another's. Every rank refuses it before running anything: exit status 2, a message
    naming the conflict and what to do, the usage line, no file written."""
    needs_mpi()
    prog = tmp_path / "sum.kiln"
    prog.write_text("input x : f32[4]\noutput y : f32[4]\ncall allreduce(x) -> y\n")
    args = [MPIEXEC, "-np", "2", "--oversubscribe", kiln_binary(), "run", str(prog), "--streams", "2",
            "--output", f"y={tmp_path}/y{{rank}}.npy"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=mpi_env())
    assert result.returncode == 2, result.stdout + result.stderr
    assert ("kiln: --streams 2 under mpirun (2 ranks): routine 'main' runs a collective (allreduce at line 3)"
            in result.stderr), result.stderr
    assert "use --streams 1" in result.stderr, result.stderr
    assert "usage: kiln run" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sum.kiln"]


def test_streams_without_collectives_under_mpirun_run(tmp_path):
    """Routines without collectives never meet across ranks: each rank runs its 2 copies, and
    --streams 1 stays fine for a program with collectives, as does --streams 2 in a world of one."""
    needs_mpi()
    write_inputs(tmp_path, 2)
    double = tmp_path / "double.kiln"
    double.write_text("input x : f32[2, 3]\noutput y : f32[2, 3]\ny[i, j] = x[i, j] * 2\n")
    args = [MPIEXEC, "-np", "2", "--oversubscribe", kiln_binary(), "run", str(double), "--streams", "2",
            "--input", f"x={tmp_path}/x{{rank}}.npy", "--output", f"y={tmp_path}/double{{rank}}.npy"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=mpi_env())
    assert result.returncode == 0, result.stdout + result.stderr
    for q in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"double{q}.npy"), inputs_of(q, 2)["x"] * 2)
    total = tmp_path / "sum.kiln"
    total.write_text("input x : f32[2, 3]\noutput y : f32[2, 3]\ncall allreduce(x) -> y\n")
    for launcher, streams, tag in (([MPIEXEC, "-np", "2", "--oversubscribe"], "1", "ranks"), ([], "2", "alone")):
        args = launcher + [kiln_binary(), "run", str(total), "--streams", streams,
                           "--input", f"x={tmp_path}/x{{rank}}.npy", "--output", f"y={tmp_path}/{tag}{{rank}}.npy"]
        result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=mpi_env())
        assert result.returncode == 0, result.stdout + result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "ranks0.npy"), inputs_of(0, 2)["x"] + inputs_of(1, 2)["x"])
    np.testing.assert_array_equal(np.load(tmp_path / "alone0.npy"), inputs_of(0, 2)["x"])
