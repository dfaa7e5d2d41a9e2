"""Shared fixtures of the Python package's tests (run by `make test` through ctest)."""

import atexit
import os
import shutil
import tempfile

import kiln
import pytest

# The devices the tests run on: those usable here among kiln's three kinds.
DEVICES = [d for d in ("cpu", "interp", "opencl") if d in kiln.devices()]
# Devices whose memory is host memory: run.tensor() views it without a copy.
HOST_MEMORY_DEVICES = [d for d in ("cpu", "interp") if d in DEVICES]

AFFINE = """\
input  x : f32[4, 10]
output y : f32[4, 10]
param  w : f32[10] = 1
y[i, j] = x[i, j] * w[j] + 1
routine double_w {
  w[j] = w[j] * 2
}
"""


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(params=HOST_MEMORY_DEVICES)
def host_device(request):
    return request.param


_mpi_session_base = None


def mpi_env(**extra):
    """The environment for an mpiexec that a test starts. As root, Open MPI refuses to start
    without its two variables (tests never rely on the caller's). Its session directory goes
    under a base of this process's own: two mpiexecs at once on one machine (this test and one
    that ctest runs beside it) race to make and remove the shared /tmp/ompi.<host>.<uid>, and one
    fails with "A call to mkdir was unable to create the desired directory" (Open MPI issue
    8510). The base is short: Open MPI puts Unix sockets under it."""
    global _mpi_session_base
    if _mpi_session_base is None:
        _mpi_session_base = tempfile.mkdtemp(prefix="kiln-mpi-")
        atexit.register(shutil.rmtree, _mpi_session_base, ignore_errors=True)
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_orte_tmpdir_base=_mpi_session_base, **extra)
