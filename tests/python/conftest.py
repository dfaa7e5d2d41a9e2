"""Shared fixtures of the Python package's tests (run by `make test` through ctest)."""

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
