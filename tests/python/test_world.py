"""kiln.world() (docs/python.md, "Collectives"): in this process, a world of one; under
`mpiexec -np 2` and `-np 4`, a script in which every rank runs a program with allreduce and
allgather on every device and checks what it gets against NumPy over every rank's inputs.
Skipped only where mpiexec is absent or kiln was built without MPI."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln

from conftest import DEVICES, mpi_env

TIMEOUT_S = 240

# Run by every rank (arguments: a folder, then devices): checks its values, then writes what it saw
# to FOLDER/seenRANK.json.
SCRIPT = """\
import json, sys
import numpy as np
import kiln

world = kiln.world()
R, me = world.size, world.rank
assert (kiln.world().rank, kiln.world().size) == (me, R)  # the same world every time

def x_of(r):
    return (np.arange(6, dtype=np.float32).reshape(2, 3) - 2) * (r + 1)

def k_of(r):
    return np.array([3 * r, 7 - r], dtype=np.int32)

prog = kiln.Program.from_text(f'''\\
input x : f32[2, 3]
input k : i32[2]
output sum : f32[2, 3]
output top : i32[2]
output all : f32[{2 * R}, 3]
output kall : i32[{2 * R}]
output r : i32
output n : i32
call allreduce(x) -> sum
call allreduce(k, op=2) -> top
call allgather(x) -> all
call allgather(k) -> kall
call rank() -> r
call world_size() -> n
''')
xs = [x_of(r) for r in range(R)]
ks = [k_of(r) for r in range(R)]
for device in sys.argv[2:]:
    out = prog.compile(device=device)(x=x_of(me), k=k_of(me))
    np.testing.assert_array_equal(out["sum"], np.sum(xs, axis=0, dtype=np.float32), err_msg=device)
    np.testing.assert_array_equal(out["top"], np.max(ks, axis=0), err_msg=device)
    np.testing.assert_array_equal(out["all"], np.concatenate(xs), err_msg=device)
    np.testing.assert_array_equal(out["kall"], np.concatenate(ks), err_msg=device)
    assert int(out["r"]) == me and int(out["n"]) == R, (device, out["r"], out["n"])
# A file per rank: mpiexec may join the ranks' standard outputs mid-line.
with open(f"{sys.argv[1]}/seen{me}.json", "w") as f:
    json.dump({"rank": me, "size": R, "repr": repr(world), "describe": world.describe()}, f)
"""


def test_alone_the_world_is_one_rank():
    world = kiln.world()
    assert (world.rank, world.size) == (0, 1)
    assert "world of one" in world.describe()
    assert repr(world) == "kiln.World(rank=0, size=1: a world of one (not started by mpirun))"
    assert isinstance(kiln.built_with_mpi(), bool)


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_rank_runs_collectives_under_mpiexec(tmp_path, ranks):
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not installed")
    if not kiln.built_with_mpi():
        pytest.skip("this kiln was built without MPI")
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT)
    # PYTHONPATH finds this kiln.
    env = mpi_env(PYTHONPATH=str(Path(kiln.__file__).parent.parent))
    result = subprocess.run([mpiexec, "-np", str(ranks), "--oversubscribe", sys.executable, str(script), str(tmp_path),
                             *DEVICES], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    seen = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("seen*.json"))]
    assert sorted(s["rank"] for s in seen) == list(range(ranks)), result.stdout
    for s in seen:
        assert s["size"] == ranks
        assert s["repr"].startswith(f"kiln.World(rank={s['rank']}, size={ranks}: MPI rank {s['rank']} of {ranks}")
        assert s["describe"] in s["repr"]
