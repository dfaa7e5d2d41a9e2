"""The ONNX backend's node tests through kiln.onnx (onnx_node_tests.py): no wrong result, and at
least as many passing as when this floor was set (docs/onnx.md has the coverage by operator)."""

import os

import pytest

pytest.importorskip("onnx")
import onnx_node_tests  # noqa: E402

# 636 passed on 2026-12-02 (interp); a change that passes fewer has lost an operator.
PASSED_FLOOR = 630


@pytest.mark.skipif(not os.path.isdir(onnx_node_tests.ROOT), reason="Debian's libonnx-testdata is not installed")
def test_no_node_test_gives_a_wrong_result():
    results = onnx_node_tests.run_all("interp")
    failed = {name: why for name, (status, _, why) in results.items() if status == "failed"}
    assert not failed, "\n".join(f"{name}: {why}" for name, why in sorted(failed.items()))
    passed = sum(1 for status, _, _ in results.values() if status == "passed")
    assert passed >= PASSED_FLOOR, f"{passed} node tests passed, fewer than {PASSED_FLOOR}"
