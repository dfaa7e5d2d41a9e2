"""ctest python.torch: tests/python/test_torch.py with an interpreter that has PyTorch.

The build's virtual environment has no PyTorch (it pins NumPy 2, which Debian's python3-torch 1.13
was not built for), so these tests run with the interpreter the environment was made from, where
Debian's python3-torch, python3-numpy and python3-pytest live (`make test` installs them). The
module built for the environment imports there too: the same interpreter. Without PyTorch or
pytest the test is skipped (exit status 77, ctest's SKIP_RETURN_CODE), saying what to install.
"""

import importlib.util
import sys
from pathlib import Path

missing = [name for name in ("torch", "pytest") if importlib.util.find_spec(name) is None]
if missing:
    print(f"python.torch: {sys.executable} has no {' and no '.join(missing)}; "
          "install Debian's python3-torch and python3-pytest (make test does) to run tests/python/test_torch.py")
    sys.exit(77)

import pytest  # noqa: E402 (after the check above)

sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", str(Path(__file__).with_name("test_torch.py"))]))
