"""kiln.onnx (docs/onnx.md): ONNX models imported into kiln, their outputs against ONNX Runtime's
on every device here, and the errors a model kiln cannot take gets."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import kiln  # noqa: E402
import kiln.onnx  # noqa: E402

from conftest import DEVICES  # noqa: E402

RNG = np.random.default_rng(0)
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def weights(name, shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def onnxruntime_outputs(m, feeds):
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in m.graph.output], session.run(None, feeds)))


def assert_matches_onnxruntime(m, feeds, devices=DEVICES, rtol=1e-4):
    want = onnxruntime_outputs(m, feeds)
    for device in devices:
        got = kiln.onnx.compile(m, device=device)(**feeds)
        assert sorted(got) == sorted(want)
        for name in want:
            scale = max(1.0, float(np.abs(want[name]).max())) if want[name].size else 1.0
            np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=rtol * scale,
                                       err_msg=f"{name} on {device}")


def small_cnn():
    """Convolutions (padded, strided, depthwise, grouped), BatchNormalization, pools, a slice, a
    concatenation, a flatten into Gemm and a softmax, over a batch that is a size."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], strides=[2, 2], group=8),
        helper.make_node("Conv", ["c2", "w3"], ["c3"], pads=[1, 1, 1, 1], group=2),
        helper.make_node("AveragePool", ["c3"], ["a2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Slice", ["p1", "st", "en", "ax"], ["p1s"]),
        helper.make_node("Concat", ["a2", "p1s"], ["cat"], axis=1),
        helper.make_node("Flatten", ["cat"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "wd", "bd"], ["z"], transB=1),
        helper.make_node("Softmax", ["z"], ["y"], axis=1),
    ]
    positive = numpy_helper.from_array(np.abs(RNG.standard_normal(8)).astype(np.float32) + 0.5, "s")
    variance = numpy_helper.from_array(np.abs(RNG.standard_normal(8)).astype(np.float32) + 0.5, "v")
    inits = [weights("w1", (8, 3, 3, 3)), weights("b1", (8,)), weights("w2", (8, 1, 3, 3)),
             weights("w3", (8, 4, 3, 3)), weights("wd", (10, 12 * 9)), weights("bd", (10,)), positive,
             weights("bb", (8,)), weights("m", (8,)), variance, ints("st", [0, 0, 0]), ints("en", [4, 3, 3]),
             ints("ax", [1, 2, 3])]
    return model(nodes, [f32("x", ["batch", 3, 16, 16])], [f32("y", ["batch", 10])], inits)


def residual_block():
    """Convolutions that become conv2d calls: a padded 3x3 from the graph's input with its Relu,
    a 1x1 with its BatchNormalization and Relu, a strided 3x3 and a strided 1x1 projection, a
    residual Add and its Relu, and the flatten after a global pool."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("BatchNormalization", ["c2", "s", "bb", "m", "v"], ["n2"]),
        helper.make_node("Relu", ["n2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Conv", ["r1", "wp"], ["proj"], strides=[2, 2]),
        helper.make_node("Add", ["c3", "proj"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wd"], ["y"], transB=1),
    ]
    positive = numpy_helper.from_array(np.abs(RNG.standard_normal(32)).astype(np.float32) + 0.5, "s")
    variance = numpy_helper.from_array(np.abs(RNG.standard_normal(32)).astype(np.float32) + 0.5, "v")
    inits = [weights("w1", (16, 16, 3, 3), 0.1), weights("b1", (16,)), weights("w2", (32, 16, 1, 1), 0.2),
             positive, weights("bb", (32,)), weights("m", (32,)), variance, weights("w3", (32, 32, 3, 3), 0.1),
             weights("b3", (32,)), weights("wp", (32, 16, 1, 1), 0.2), weights("wd", (5, 32))]
    return model(nodes, [f32("x", ["batch", 16, 9, 9])], [f32("y", ["batch", 5])], inits)


@pytest.fixture
def nchw(monkeypatch):
    """The data in NCHW between convolutions, as conv2d calls read them (the tests of what folds
    into a call look for conv2d; test_convolutions_keep_their_data_in_blocks_of_channels has them
    in blocks, conv2d_blocked, which takes the same folds)."""
    monkeypatch.setattr(kiln.onnx._conv, "_DATA_IN_BLOCKS", False)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("blocks", [True, False])
def test_convolutions_as_products_match_onnxruntime(batch, blocks, monkeypatch):
    monkeypatch.setattr(kiln.onnx._conv, "_DATA_IN_BLOCKS", blocks)  # conv2d_blocked, or conv2d over NCHW
    x = RNG.standard_normal((batch, 16, 9, 9)).astype(np.float32)
    assert_matches_onnxruntime(residual_block(), {"x": x})


def test_convolutions_become_conv2d_calls_with_the_normalization_residual_and_relu_folded_in(tmp_path, nchw):
    program, text = kiln.onnx.import_text(residual_block())
    for name in ("c1", "n2", "proj", "sum"):  # computed by the calls
        assert name not in program.onnx_names, name
    assert program.tensors[program.onnx_names["r1"]][2] == ("batch", 16, 9, 9)  # ONNX's order
    calls = [line for line in text.splitlines() if line.startswith("call conv2d(")]
    assert len(calls) == 4, text
    names = program.onnx_names
    assert [c.split(" -> ")[1] for c in calls] == [names["r1"], names["r2"], names["c3"], names["r3"]], calls
    assert sum("relu=1" in c for c in calls) == 3 and "pad_top=1" in calls[0] and "stride_h=2" in calls[2], calls
    # The projection, computed after c3, takes the Add of c3 as its residual z, and the Relu after it.
    assert calls[3].split(", ")[3] == names["c3"] and "relu=1" in calls[3], calls
    assert "bn_scale" not in text and "kiln_conv_weights" in text  # the normalization is in w2's weights
    binary = os.environ.get("KILN_BINARY")
    if binary:
        (tmp_path / "block.kiln").write_text(text)
        ir = subprocess.run([binary, "compile", str(tmp_path / "block.kiln"), "--emit", "ir"], capture_output=True,
                            text=True, check=True).stdout
        assert ir.count("call conv2d(") == 4 and ir.count("call gemm(") == 1, ir


def test_deep_convolutions_store_their_weights_in_blocks_of_output_channels():
    """A product 512 rows deep or more (64 channels by a 3x3 window, its BatchNormalization folded
    in; a 1x1 window over 512 channels) gets its weights once, in blocks of 16 output channels
    ([ceil(O/16), C, KH, 16·KW]), and transpose_w=16; one whose groups' output channels do not fill
    blocks (2 groups of 10, each 64 channels by 3x3 deep) with the output channel last ([C/groups,
    KH, KW, O]) and transpose_w=1; a shallower one (20 channels, 1x1) keeps ONNX's layout, but one
    256 deep (1x1 from 256 channels) goes in blocks too over an image of 7 x 7. Outputs as ONNX
    Runtime's on every device."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("Conv", ["c2", "w3", "b3"], ["c3"], group=2, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c3", "w4", "b4"], ["y"]),
        helper.make_node("Conv", ["c2", "w5", "b5"], ["y2"]),
    ]
    positive = numpy_helper.from_array(np.abs(RNG.standard_normal(512)).astype(np.float32) + 0.5, "s")
    variance = numpy_helper.from_array(np.abs(RNG.standard_normal(512)).astype(np.float32) + 0.5, "v")
    inits = [weights("w1", (512, 64, 3, 3), 0.05), positive, weights("bb", (512,)), weights("m", (512,)), variance,
             weights("w2", (256, 512, 1, 1), 0.05), weights("b2", (256,)), weights("w3", (20, 128, 3, 3), 0.05),
             weights("b3", (20,)), weights("w4", (20, 20, 1, 1)), weights("b4", (20,)),
             weights("w5", (24, 256, 1, 1), 0.05), weights("b5", (24,))]
    m = model(nodes, [f32("x", ["batch", 64, 7, 7])], [f32("y", ["batch", 20, 7, 7]), f32("y2", ["batch", 24, 7, 7])],
              inits)
    _, text = kiln.onnx.import_text(m)
    calls = [line for line in text.splitlines() if line.startswith("call conv2d(")]
    layouts = [re.search(r"transpose_w=(\d+)", c) for c in calls]
    assert [t.group(1) if t else None for t in layouts] == ["16", "16", "1", None, "16"], calls
    params = [line for line in text.splitlines() if line.startswith("param ")]
    blocks = [p for p in params if "output_blocks" in p]
    assert len(blocks) == 3 and blocks[0].endswith("f32[32, 64, 3, 48]"), params
    assert blocks[1].endswith("f32[16, 512, 1, 16]") and blocks[2].endswith("f32[2, 256, 1, 16]"), params
    output_last = [p for p in params if "output_last" in p]
    assert len(output_last) == 1 and output_last[0].endswith("f32[128, 3, 3, 20]"), params
    # No copy of the weights in ONNX's layout beside them: the folded ones are declared once.
    assert not any(re.match(r"param (kiln_conv_weights_\d|w1 |w2 |w3 )", p) for p in params), params
    assert_matches_onnxruntime(m, {"x": RNG.standard_normal((2, 64, 7, 7)).astype(np.float32)})


def test_convolutions_keep_their_data_in_blocks_of_channels():
    """Where every Conv has one group and nothing concatenates, the convolutions are
    conv2d_blocked calls writing their data in blocks of 16 channels: the first reads the graph's
    3-channel input as it is (NCHW), the next and a residual read its blocks, 20 channels make a
    last block of 4 lanes, a MaxPool between convolutions pools the blocks; what other operators
    read (a Sigmoid, the graph's outputs) is computed from the blocks once. Outputs as ONNX
    Runtime's on every device. With a Concat in the graph, or a grouped convolution, every
    convolution is conv2d over NCHW."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("Conv", ["c2", "w3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c3", "r1"], ["a3"]),
        helper.make_node("Relu", ["a3"], ["r3"]),
        helper.make_node("MaxPool", ["r3"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w4", "b4"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Sigmoid", ["c2"], ["y2"]),
    ]
    inits = [weights("w1", (32, 3, 3, 3)), weights("w2", (20, 32, 1, 1)), weights("b2", (20,)),
             weights("w3", (32, 20, 3, 3), 0.1), weights("w4", (24, 32, 3, 3), 0.1), weights("b4", (24,))]
    outputs = [f32("y", ["batch", 24, 2, 2]), f32("y2", ["batch", 20, 8, 8])]
    m = model(nodes, [f32("x", ["batch", 3, 8, 8])], outputs, inits)
    _, text = kiln.onnx.import_text(m)
    lines = text.splitlines()
    assert not any(line.startswith("call conv2d(") for line in lines), text
    calls = [line for line in lines if line.startswith("call conv2d_blocked(")]
    assert len(calls) == 4 and calls[0].startswith("call conv2d_blocked(x, "), text
    assert not any("16*i1 + i4" in line for line in lines), text  # nothing NCHW put in blocks
    pools = [line for line in lines if line.startswith("kiln_blocks_") and "max(" in line]  # the pool in blocks
    assert len(pools) == 1 and pools[0].count(", i4]") == 5 and "kiln_pool_rows" not in text, text
    assert "output y : f32[batch, 24, 2, 2]" in lines and "output y2 : f32[batch, 20, 8, 8]" in lines, text
    assert sum(line.startswith(("y[", "y2[")) for line in lines) == 2, text  # each computed once from its blocks
    assert_matches_onnxruntime(m, {"x": RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)})
    for other in (helper.make_node("Concat", ["y2", "y2"], ["y3"], axis=1),
                  helper.make_node("Conv", ["y2", "w5"], ["y3"], group=2)):
        more = model(nodes + [other], [f32("x", ["batch", 3, 8, 8])], outputs + [f32("y3", ["batch", 40, 8, 8])],
                     inits + [weights("w5", (40, 10, 1, 1))])
        _, text = kiln.onnx.import_text(more)
        assert "conv2d_blocked" not in text, text


def test_depthwise_convolutions_keep_their_data_in_blocks_too():
    """MobileNet-V2's inverted residual (1x1 into 40 channels with ReLU6, a depthwise 3x3 with
    ReLU6, 1x1 back to 16, the residual), then a depthwise 3x3 at stride 2: every convolution a
    conv2d_blocked call (the depthwise ones with groups, their weights in blocks), nothing put
    in blocks or taken out of them but the graph's input and output. Outputs as ONNX Runtime's
    on every device."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=40, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["x", "c3"], ["a"]),
        helper.make_node("Conv", ["a", "w4"], ["y"], group=16, pads=[1, 1, 1, 1], strides=[2, 2]),
    ]
    inits = [weights("w1", (40, 16, 1, 1)), weights("b1", (40,)), weights("w2", (40, 1, 3, 3)), weights("b2", (40,)),
             weights("w3", (16, 40, 1, 1)), weights("b3", (16,)), weights("w4", (16, 1, 3, 3)),
             numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
    m = model(nodes, [f32("x", ["batch", 16, 9, 9])], [f32("y", ["batch", 16, 5, 5])], inits)
    _, text = kiln.onnx.import_text(m)
    calls = [line for line in text.splitlines() if line.startswith("call ")]
    assert len(calls) == 4 and all(c.startswith("call conv2d_blocked(") for c in calls), text
    assert "groups=40" in calls[1] and "clip_max=6" in calls[1] and "groups=16" in calls[3], calls
    assert sum("16*i1 + i4" in line for line in text.splitlines()) == 1, text  # x, once (and as the residual)
    assert_matches_onnxruntime(m, {"x": RNG.standard_normal((2, 16, 9, 9)).astype(np.float32)})


def test_a_per_channel_multiply_and_add_fold_into_the_convolution(nchw):
    """Conv, BatchNormalization, then Mul and Add by known per-channel values (Inception v2's
    export, whose [C, 1, 1] scales an Unsqueeze after the Conv makes), then Relu: one conv2d call
    with relu=1 and no statement of its own. A Mul by a tensor that is not per channel stays a
    statement."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
             helper.make_node("Unsqueeze", ["scale", "axes"], ["scale3"]),
             helper.make_node("Mul", ["n", "scale3"], ["ns"]),
             helper.make_node("Add", ["shift4", "ns"], ["na"]),
             helper.make_node("Relu", ["na"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c2"]),
             helper.make_node("Mul", ["c2", "rows"], ["y"])]
    positive = np.abs(RNG.standard_normal(6)).astype(np.float32) + 0.5
    inits = [weights("w", (6, 3, 3, 3), 0.2), numpy_helper.from_array(positive, "s"), weights("bb", (6,)),
             weights("m", (6,)), numpy_helper.from_array(positive[::-1].copy(), "v"), weights("scale", (6,)),
             ints("axes", [1, 2]), weights("shift4", (1, 6, 1, 1)), weights("w2", (4, 6, 1, 1), 0.3),
             weights("rows", (5, 1))]
    m = model(nodes, [f32("x", ["batch", 3, 5, 5])], [f32("y", ["batch", 4, 5, 5])], inits)
    program, text = kiln.onnx.import_text(m)
    calls = [line for line in text.splitlines() if line.startswith("call conv2d(")]
    assert len(calls) == 2 and "relu=1" in calls[0], text
    statements = [line for line in text.splitlines() if " = " in line and not line.startswith(("param", "tensor"))]
    assert len(statements) == 1 and "rows" in statements[0], text  # the Mul by rows of 5, not per channel
    assert_matches_onnxruntime(m, {"x": RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)})


@pytest.mark.parametrize("op, out, attrs", [
    ("MaxPool", [5, 5], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ("MaxPool", [7, 4], dict(kernel_shape=[3, 2], strides=[1, 2], pads=[1, 0, 1, 1], dilations=[2, 1])),
    ("AveragePool", [5, 5], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ("AveragePool", [9, 8], dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1)),
])
def test_pools_over_two_dimensions_are_written_out_tap_by_tap(op, out, attrs):
    """Each tap a term at constant offsets (border splitting then frees the interior of checks);
    a max's taps that can fall outside the input read -inf there, so that windows of negative
    values at the borders keep their max rather than 0."""
    m = single(op, [f32("x", [2, 3, 9, 8])], [2, 3, *out], **attrs)
    text = kiln.onnx.import_text(m)[1]
    assert " where " not in text and ("select(" in text) == (op == "MaxPool"), text
    x = -np.abs(RNG.standard_normal((2, 3, 9, 8))).astype(np.float32) - 1
    assert_matches_onnxruntime(m, {"x": x})


def planned_chain():
    """Five 3x3 convolutions of one shape: a, then b and c from it, c's residual a (folded into
    the call), d, and e; a flatten of a is read through a view by a Gemm at the very end, so a
    lives to the end; b and c die early, and d and e can take their buffers."""
    conv = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], **conv),
        helper.make_node("Conv", ["a", "w2"], ["b"], **conv),
        helper.make_node("Relu", ["b"], ["br"]),
        helper.make_node("Conv", ["br", "w3"], ["c"], **conv),
        helper.make_node("Add", ["c", "a"], ["s"]),
        helper.make_node("Conv", ["s", "w4"], ["d"], **conv),
        helper.make_node("Conv", ["d", "w5"], ["e"], **conv),
        helper.make_node("Flatten", ["a"], ["fa"], axis=1),
        helper.make_node("Flatten", ["e"], ["fe"], axis=1),
        helper.make_node("Gemm", ["fa", "wa"], ["ga"], transB=1),
        helper.make_node("Gemm", ["fe", "we"], ["ge"], transB=1),
        helper.make_node("Add", ["ga", "ge"], ["y"]),
    ]
    inits = [weights(f"w{i}", (6, 6, 3, 3), 0.2) for i in range(1, 6)]
    inits += [weights("wa", (4, 6 * 5 * 5), 0.1), weights("we", (4, 6 * 5 * 5), 0.1)]
    return model(nodes, [f32("x", ["batch", 6, 5, 5])], [f32("y", ["batch", 4])], inits)


def test_intermediates_share_buffers_where_their_lifetimes_do_not_overlap(tmp_path, nchw):
    """Every intermediate keeps its declaration and its ONNX name; the compiler lets those whose
    lifetimes do not overlap share bytes of one buffer (docs/language.md, shared buffers), and
    `a`, read at the very end through the flatten's view, lives to the end."""
    m = planned_chain()
    program, text = kiln.onnx.import_text(m)
    declared = {line.split()[1] for line in text.splitlines() if line.startswith("tensor ")}
    names = program.onnx_names
    chain = {names[n] for n in ("a", "br", "s", "d", "e")}  # b and c are folded into the calls
    assert chain <= declared, text
    assert "y" not in declared
    binary = os.environ.get("KILN_BINARY")
    if binary:
        (tmp_path / "chain.kiln").write_text(text)
        lowered = subprocess.run([binary, "compile", str(tmp_path / "chain.kiln"), "--emit", "lowered", "--size",
                                  "batch=3"], capture_output=True, text=True, check=True).stdout
        line = next(l for l in lowered.splitlines() if l.startswith("; shared buffer"))
        spans = {}
        for entry in re.findall(r"(\w+)@(\d+) \[(\d+)-(\d+)\]", line):
            spans[entry[0]] = (int(entry[1]), int(entry[2]), int(entry[3]))
        assert chain <= set(spans), line
        last = max(s[2] for s in spans.values())
        assert spans[names["a"]][2] == last, line  # a lives until the Gemm reads it
        one = 3 * 6 * 5 * 5 * 4  # bytes of each of the five, at batch 3
        assert int(line.split(", ")[1].split()[0]) < len(spans) * one, line
    x = RNG.standard_normal((3, 6, 5, 5)).astype(np.float32)
    want = onnxruntime_outputs(m, {"x": x})["y"]
    for device in DEVICES:
        np.testing.assert_allclose(kiln.onnx.compile(m, device=device)(x=x)["y"], want, rtol=1e-4, atol=1e-4,
                                   err_msg=device)


def test_a_clip_from_zero_folds_into_the_convolution_as_relu6_does(nchw):
    """MobileNet's ReLU6 as PyTorch exports it: a Clip whose bounds are Constant nodes that come
    after the convolution in the graph. A Clip from -1 stays a statement of its own."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(np.array(0, np.float32))),
        helper.make_node("Constant", [], ["hi"], value=numpy_helper.from_array(np.array(6, np.float32))),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("Constant", [], ["lo2"], value=numpy_helper.from_array(np.array(-1, np.float32))),
        helper.make_node("Clip", ["c2", "lo2", "hi"], ["y"]),
    ]
    m = model(nodes, [f32("x", [2, 4, 6, 6])], [f32("y", [2, 5, 6, 6])],
              [weights("w1", (8, 4, 3, 3), 2.0), weights("w2", (5, 8, 1, 1), 1.0)])
    _, text = kiln.onnx.import_text(m)
    calls = [line for line in text.splitlines() if line.startswith("call conv2d(")]
    assert "relu=1, clip_max=6.0" in calls[0] and "clip_max" not in calls[1], text
    x = RNG.standard_normal((2, 4, 6, 6)).astype(np.float32) * 3
    assert_matches_onnxruntime(m, {"x": x})


def test_a_compiled_model_holds_its_weights_once(host_device):
    """kiln.onnx.compile binds the program's param arrays rather than copies of them (docs/onnx.md,
    Memory): the compiled program's weights are the program's memory."""
    m = small_cnn()
    compiled = kiln.onnx.compile(m, host_device)
    values = compiled.program.param_values
    assert values
    for name, array in values.items():
        assert np.shares_memory(compiled._compiled.tensor(name).numpy(), array), name
    feeds = {"x": RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)}
    np.testing.assert_allclose(compiled(**feeds)["y"], onnxruntime_outputs(m, feeds)["y"], rtol=1e-4, atol=1e-5)


def test_outputs_of_a_run_stay_as_they_were_after_the_next():
    """What a run returned (NumPy arrays or DLPack tensors over kiln's memory) is never a buffer
    that the next run writes: outputs are not planned."""
    run = kiln.onnx.compile(planned_chain())
    x1, x2 = (RNG.standard_normal((2, 6, 5, 5)).astype(np.float32) for _ in range(2))
    first = run(x=x1)["y"]
    kept = np.array(first, copy=True)
    run(x=x2)
    np.testing.assert_array_equal(first, kept)


@pytest.mark.parametrize("batch", [1, 3])
def test_a_small_cnn_matches_onnxruntime_at_every_batch(batch):
    x = RNG.standard_normal((batch, 3, 16, 16)).astype(np.float32)
    assert_matches_onnxruntime(small_cnn(), {"x": x})


def test_one_compiled_model_runs_at_several_batches():
    cnn = small_cnn()
    run = kiln.onnx.compile(cnn)
    for batch in (2, 5):
        x = RNG.standard_normal((batch, 3, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(run(x=x)["y"], onnxruntime_outputs(cnn, {"x": x})["y"], rtol=1e-4, atol=1e-6)


def single(op, inputs, output_shape, initializers=(), output_type=TensorProto.FLOAT, **attrs):
    names = [i.name for i in inputs] + [i.name for i in initializers]
    node = helper.make_node(op, names, ["y"], **attrs)
    return model([node], inputs, [helper.make_tensor_value_info("y", output_type, output_shape)], initializers)


OPERATOR_CASES = {
    "matmul_broadcast": lambda: (single("MatMul", [f32("a", [2, 1, 3, 4]), f32("b", [5, 4, 6])], [2, 5, 3, 6]),
                                 {"a": (2, 1, 3, 4), "b": (5, 4, 6)}),
    "transpose": lambda: (single("Transpose", [f32("a", [2, 3, 4])], [4, 2, 3], perm=[2, 0, 1]), {"a": (2, 3, 4)}),
    "reshape_split": lambda: (single("Reshape", [f32("a", [2, 12])], [2, 3, 1, 4], [ints("shape", [2, 3, 1, -1])]),
                              {"a": (2, 12)}),
    "reshape_merge": lambda: (model([helper.make_node("Reshape", ["a", "shape"], ["t"]),
                                     helper.make_node("Relu", ["t"], ["y"])],
                                    [f32("a", [2, 3, 4, 5])], [f32("y", [6, 20])], [ints("shape", [6, 20])]),
                              {"a": (2, 3, 4, 5)}),
    "channel_shuffle": lambda: (model([helper.make_node("Reshape", ["a", "split"], ["t"]),
                                       helper.make_node("Transpose", ["t"], ["u"], perm=[0, 2, 1, 3, 4]),
                                       helper.make_node("Reshape", ["u", "merge"], ["v"]),
                                       helper.make_node("Relu", ["v"], ["y"])],
                                      [f32("a", [2, 6, 3, 3])], [f32("y", [2, 6, 3, 3])],
                                      [ints("split", [2, 2, 3, 3, 3]), ints("merge", [2, 6, 3, 3])]),
                                {"a": (2, 6, 3, 3)}),
    # Heads merged back into rows (attention's [seq, heads, d] to [seq * ..., ...]): the
    # dimensions cut the elements at points that divide one another, so the middle one is read
    # through a sum of one-dimensional tables; 4 x 6 to 6 x 4 cuts them at 4 and 6, which do
    # not, so it is read through tables over the whole output.
    "reshape_regroup": lambda: (model([helper.make_node("Reshape", ["a", "shape"], ["t"]),
                                       helper.make_node("Relu", ["t"], ["y"])],
                                      [f32("a", [4, 6, 4])], [f32("y", [12, 8])], [ints("shape", [12, 8])]),
                                {"a": (4, 6, 4)}),
    "reshape_across": lambda: (model([helper.make_node("Reshape", ["a", "shape"], ["t"]),
                                      helper.make_node("Relu", ["t"], ["y"])],
                                     [f32("a", [4, 6])], [f32("y", [6, 4])], [ints("shape", [6, 4])]),
                               {"a": (4, 6)}),
    "softmax_middle_axis": lambda: (single("Softmax", [f32("a", [2, 5, 3])], [2, 5, 3], axis=1), {"a": (2, 5, 3)}),
    "reduce_mean_kept_last": lambda: (single("ReduceMean", [f32("a", [2, 3, 40])], [2, 3, 1], axes=[-1]),
                                      {"a": (2, 3, 40)}),
    "reduce_mean": lambda: (single("ReduceMean", [f32("a", [2, 3, 4])], [2, 1, 4], axes=[1]), {"a": (2, 3, 4)}),
    "leaky_relu_clip": lambda: (model([helper.make_node("LeakyRelu", ["a"], ["t"], alpha=0.2),
                                       helper.make_node("Clip", ["t", "lo", "hi"], ["y"])],
                                      [f32("a", [3, 4])], [f32("y", [3, 4])],
                                      [numpy_helper.from_array(np.array(-0.1, np.float32), "lo"),
                                       numpy_helper.from_array(np.array(0.5, np.float32), "hi")]), {"a": (3, 4)}),
    "pad": lambda: (single("Pad", [f32("a", [2, 3])], [4, 6], [ints("pads", [1, 2, 1, 1])]), {"a": (2, 3)}),
    "lrn": lambda: (single("LRN", [f32("a", [1, 5, 3, 3])], [1, 5, 3, 3], size=3, alpha=1e-2, beta=0.75),
                    {"a": (1, 5, 3, 3)}),
    "lrn_other_betas": lambda: (
        model([helper.make_node("LRN", ["a"], ["h"], size=5, alpha=0.5, beta=0.5, bias=2.0),
               helper.make_node("LRN", ["h"], ["y"], size=3, alpha=0.3, beta=0.6)],
              [f32("a", [2, 6, 3, 4])], [f32("y", [2, 6, 3, 4])]), {"a": (2, 6, 3, 4)}),
    "softmax_opset11": lambda: (model([helper.make_node("Softmax", ["a"], ["y"], axis=1)], [f32("a", [2, 3, 4])],
                                      [f32("y", [2, 3, 4])], opset=11), {"a": (2, 3, 4)}),
    "where_compare_cast": lambda: (model([helper.make_node("Greater", ["a", "b"], ["c"]),
                                          helper.make_node("Where", ["c", "a", "b"], ["t"]),
                                          helper.make_node("Cast", ["c"], ["k"], to=TensorProto.FLOAT),
                                          helper.make_node("Add", ["t", "k"], ["y"])],
                                         [f32("a", [3, 4]), f32("b", [4])], [f32("y", [3, 4])]),
                                   {"a": (3, 4), "b": (4,)}),
    # Windows inside the input at stride 1 (the output smaller than the input), and asymmetric
    # padding at stride 2 that reaches past its end.
    "conv_unpadded": lambda: (single("Conv", [f32("a", [2, 3, 9, 8])], [2, 4, 7, 6], [weights("w", (4, 3, 3, 3))]),
                              {"a": (2, 3, 9, 8)}),
    "conv_asymmetric_pads": lambda: (single("Conv", [f32("a", [2, 3, 9, 8])], [2, 4, 10, 4],
                                            [weights("w", (4, 3, 3, 3))], pads=[1, 0, 2, 1], strides=[1, 2]),
                                     {"a": (2, 3, 9, 8)}),
    # Transposed convolutions: in two groups with a bias, strides, dilations, asymmetric pads and
    # output_padding; padded as SAME_LOWER says; padded to a given output_shape.
    "conv_transpose_grouped": lambda: (single("ConvTranspose", [f32("a", [2, 4, 5, 6])], [2, 6, 11, 22],
                                              [weights("w", (4, 3, 3, 4)), weights("b", (6,))], group=2,
                                              strides=[2, 3], dilations=[1, 2], pads=[1, 0, 0, 2],
                                              output_padding=[1, 2]),
                                       {"a": (2, 4, 5, 6)}),
    "conv_transpose_same_lower": lambda: (single("ConvTranspose", [f32("a", [1, 2, 4, 5])], [1, 3, 8, 10],
                                                 [weights("w", (2, 3, 3, 3))], strides=[2, 2], auto_pad="SAME_LOWER"),
                                          {"a": (1, 2, 4, 5)}),
    "conv_transpose_unet": lambda: (single("ConvTranspose", [f32("a", [2, 6, 5, 7])], [2, 4, 10, 14],
                                           [weights("w", (6, 4, 2, 2)), weights("b", (4,))], strides=[2, 2]),
                                    {"a": (2, 6, 5, 7)}),
    "conv_transpose_1d": lambda: (single("ConvTranspose", [f32("a", [2, 3, 9])], [2, 5, 20],
                                         [weights("w", (3, 5, 4))], strides=[2], dilations=[2], pads=[2, 1]),
                                  {"a": (2, 3, 9)}),
    # An output_shape past the natural extent: nothing padded, the end left to the bias (as ONNX
    # Runtime; a negative padding split by floor division would shift it a row).
    "conv_transpose_past_its_extent": lambda: (model([helper.make_node("ConvTranspose", ["a", "w", "b"], ["y"],
                                                                       strides=[3, 2], output_shape=[10, 8],
                                                                       auto_pad="SAME_UPPER")],
                                                     [f32("a", [1, 1, 3, 3])], [f32("y", [1, 2, 10, 8])],
                                                     [weights("w", (1, 2, 3, 3)), weights("b", (2,))]),
                                               {"a": (1, 1, 3, 3)}),
    "conv_transpose_output_shape": lambda: (model([helper.make_node("ConvTranspose", ["a", "w"], ["y"], strides=[2, 2],
                                                                    output_shape=[6, 8])],
                                                  [f32("a", [1, 2, 3, 4])], [f32("y", [1, 2, 6, 8])],
                                                  [weights("w", (2, 2, 3, 3))]), {"a": (1, 2, 3, 4)}),
    # Pad by a value other than 0, and by the edge, a reflection and a wrap (opset 19, given axes).
    "pad_constant_value": lambda: (single("Pad", [f32("a", [2, 3, 4])], [3, 5, 9],
                                          [ints("pads", [0, 1, 2, 1, 1, 3]),
                                           numpy_helper.from_array(np.array(1.5, np.float32), "value")]),
                                   {"a": (2, 3, 4)}),
    "pad_at_the_end_only": lambda: (single("Pad", [f32("a", [2, 3, 4])], [2, 5, 4], [ints("pads", [0, 0, 0, 0, 2, 0])]),
                                    {"a": (2, 3, 4)}),
    "pad_edge": lambda: (single("Pad", [f32("a", [2, 3, 4])], [3, 6, 8], [ints("pads", [0, 2, 1, 1, 1, 3])],
                                mode="edge"), {"a": (2, 3, 4)}),
    "pad_reflect": lambda: (single("Pad", [f32("a", [2, 3, 4])], [4, 5, 9], [ints("pads", [1, 2, 3, 1, 0, 2])],
                                   mode="reflect"), {"a": (2, 3, 4)}),
    "pad_wrap_axes": lambda: (model([helper.make_node("Pad", ["a", "pads", "", "axes"], ["y"], mode="wrap")],
                                    [f32("a", [2, 3, 4])], [f32("y", [2, 6, 10])],
                                    [ints("pads", [2, 3, 1, 3]), ints("axes", [1, -1])], opset=19),
                              {"a": (2, 3, 4)}),
    "layer_normalization": lambda: (model([helper.make_node("LayerNormalization", ["a", "scale", "bias"], ["y"],
                                                         axis=-2, epsilon=1e-3)],
                                          [f32("a", [2, 3, 4, 5])], [f32("y", [2, 3, 4, 5])],
                                          [weights("scale", (4, 5)), weights("bias", (5,))]), {"a": (2, 3, 4, 5)}),
    "expand_sum": lambda: (model([helper.make_node("Expand", ["a", "shape"], ["t"]),
                                  helper.make_node("Sum", ["t", "a", "a"], ["y"])],
                                 [f32("a", [3, 1])], [f32("y", [2, 3, 4])], [ints("shape", [2, 3, 4])]), {"a": (3, 1)}),
}


@pytest.mark.parametrize("case", sorted(OPERATOR_CASES))
def test_operators_match_onnxruntime(case):
    m, shapes = OPERATOR_CASES[case]()
    assert_matches_onnxruntime(m, {n: RNG.standard_normal(s).astype(np.float32) for n, s in shapes.items()})


def test_a_reshape_that_regroups_dimensions_reads_through_one_dimensional_tables():
    m, _ = OPERATOR_CASES["reshape_regroup"]()
    text = kiln.onnx.import_text(m)[1]
    tables = [line for line in text.splitlines() if line.startswith("param kiln_reshape_index")]
    assert tables and all("," not in line.split("[", 1)[1] for line in tables), tables
    m, _ = OPERATOR_CASES["reshape_across"]()
    assert "param kiln_reshape_index_1 : i32[6, 4]" in kiln.onnx.import_text(m)[1]


@pytest.mark.parametrize("perm, copied", [((0, 2, 1), False), ((1, 2, 0), True), ((2, 0, 1), None)])
def test_a_transposed_right_operand_is_read_by_gemm_transposed(perm, copied, tmp_path):
    """K^T of attention: a Transpose read only as a MatMul's right operand is stored with its last
    two dimensions swapped (none stored where that is the input's own order) and the product is a
    gemm with transpose_b; a Transpose that moves the input's last dimension elsewhere, or that
    another node reads too, is copied as written."""
    x = (8, 16, 32)
    k = tuple(x[p] for p in perm)  # the product's right operand, [batch, K, N]
    a = (k[0], 16, k[1])
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=list(perm)),
             helper.make_node("MatMul", ["a", "xt"], ["y"])]
    m = model(nodes, [f32("a", a), f32("x", x)], [f32("y", [a[0], 16, k[2]])])
    feeds = {"a": RNG.standard_normal(a).astype(np.float32), "x": RNG.standard_normal(x).astype(np.float32)}
    assert_matches_onnxruntime(m, feeds)
    text = kiln.onnx.import_text(m)[1]
    assert ("kiln_transposed" in text) == bool(copied), text
    products = [line for line in text.splitlines() if "= sum(" in line]
    assert len(products) == 1 and products[0].endswith("xt[i0, r0, i2])") == (copied is None), products
    binary = os.environ.get("KILN_BINARY")
    if binary and copied is not None:
        (tmp_path / "product.kiln").write_text(text)
        ir = subprocess.run([binary, "compile", str(tmp_path / "product.kiln"), "--emit", "ir"], capture_output=True,
                            text=True, check=True).stdout
        assert "call gemm(a, " in ir and "transpose_b=1, batch=1)" in ir, ir
    # Read by another node too: copied in the Transpose's own order, as before.
    both = model(nodes + [helper.make_node("Relu", ["xt"], ["z"])], [f32("a", a), f32("x", x)],
                 [f32("y", [a[0], 16, k[2]]), f32("z", list(k))])
    assert "kiln_transposed" not in kiln.onnx.import_text(both)[1]
    assert_matches_onnxruntime(both, feeds)


def test_a_transposed_convolution_with_known_weights_is_a_product_and_then_a_gather(tmp_path):
    """One group, known f32 weights: the columns (each input point's share of each output
    channel and kernel position) are a gemm call, and each output point sums the columns of the
    taps that reach it; at a kernel as wide as its stride that is one tap, read without a sum.
    In groups, a loop nest over the group's channels and the taps."""
    binary = os.environ.get("KILN_BINARY")
    for case, columns, summed in (("conv_transpose_same_lower", True, True), ("conv_transpose_unet", True, False),
                                  ("conv_transpose_1d", True, True), ("conv_transpose_grouped", False, True)):
        text = kiln.onnx.import_text(OPERATOR_CASES[case]()[0])[1]
        assert ("kiln_columns" in text) == columns, (case, text)
        last = text.strip().splitlines()[-1]
        assert last.startswith("y[") and ("= sum(" in last) == summed, (case, last)
    if binary:  # a product large enough for a gemm call (ral.md, "Automatic calls")
        m = single("ConvTranspose", [f32("a", [1, 32, 8, 8])], [1, 16, 16, 16], [weights("w", (32, 16, 2, 2))],
                   strides=[2, 2])
        (tmp_path / "ct.kiln").write_text(kiln.onnx.import_text(m)[1])
        ir = subprocess.run([binary, "compile", str(tmp_path / "ct.kiln"), "--emit", "ir"], capture_output=True,
                            text=True, check=True).stdout
        assert "call gemm(kiln_transposed_conv_weights" in ir and "transpose_a=1" in ir, ir
        assert_matches_onnxruntime(m, {"a": RNG.standard_normal((1, 32, 8, 8)).astype(np.float32)})


@pytest.mark.parametrize("op, reduction, weighted, ignore", [("NegativeLogLikelihoodLoss", "mean", True, 2),
                                                              ("NegativeLogLikelihoodLoss", "none", False, None),
                                                              ("SoftmaxCrossEntropyLoss", "mean", False, -1),
                                                              ("SoftmaxCrossEntropyLoss", "sum", True, None)])
def test_losses_over_classes_match_onnxruntime(op, reduction, weighted, ignore):
    """NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (and its log_prob output) over
    [N, C, d1] scores: weighted or not, some targets the ignored class or not, each reduction."""
    n, c, d = 3, 5, 4
    labels = RNG.integers(0, c, (n, d))
    if ignore is not None:
        labels[0, 1] = labels[2, 3] = ignore
    attrs = {"reduction": reduction, **({"ignore_index": ignore} if ignore is not None else {})}
    names = ["x", "t"] + (["w"] if weighted else [])
    outputs = ["y"] + (["log_prob"] if op == "SoftmaxCrossEntropyLoss" else [])
    value = [f32("y", [n, d] if reduction == "none" else [])] + [f32(o, [n, c, d]) for o in outputs[1:]]
    m = model([helper.make_node(op, names, outputs, **attrs)],
              [f32("x", [n, c, d]), helper.make_tensor_value_info("t", TensorProto.INT64, [n, d])], value,
              [weights("w", (c,))] if weighted else [])
    assert_matches_onnxruntime(m, {"x": RNG.standard_normal((n, c, d)).astype(np.float32), "t": labels})


@pytest.mark.parametrize("op, direction, lengths, extra", [
    ("LSTM", "bidirectional", True, {}), ("GRU", "reverse", False, {"linear_before_reset": 1}),
    ("GRU", "bidirectional", True, {}), ("RNN", "forward", False, {}), ("LSTM", "forward", False, {})])
def test_recurrent_layers_match_onnxruntime(op, direction, lengths, extra):
    """RNN, GRU and LSTM unrolled over 18 steps (Y stacked through a tree of statements): both
    directions or one, rows shorter than the sequence (sequence_lens), with initial states, biases
    and peepholes, and every output. (Batch-first layouts, which ONNX Runtime refuses, are in the
    node tests.)"""
    layout = 0
    steps, batch, inputs, hidden = 18, 3, 4, 5
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    d = 2 if direction == "bidirectional" else 1
    x_shape = [batch, steps, inputs] if layout else [steps, batch, inputs]
    state = [batch, d, hidden] if layout else [d, batch, hidden]
    names = ["x", "w", "r", "b", "lens" if lengths else "", "h0"] + (["c0", "p"] if op == "LSTM" else [])
    inits = [weights("w", (d, gates * hidden, inputs)), weights("r", (d, gates * hidden, hidden)),
             weights("b", (d, 2 * gates * hidden)), weights("h0", state)]
    if op == "LSTM":
        inits += [weights("c0", state), weights("p", (d, 3 * hidden))]
    outputs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    y_shape = [batch, steps, d, hidden] if layout else [steps, d, batch, hidden]
    graph_inputs = [f32("x", x_shape)]
    feeds = {"x": RNG.standard_normal(x_shape).astype(np.float32)}
    if lengths:
        graph_inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]))
        feeds["lens"] = np.array([steps, 7, 1], np.int32)
    m = model([helper.make_node(op, names, outputs, hidden_size=hidden, direction=direction, layout=layout, **extra)],
              graph_inputs, [f32("y", y_shape)] + [f32(o, state) for o in outputs[1:]], inits, opset=14)
    # PoCL takes tens of seconds to build the larger unrolled programs: opencl runs the RNN.
    assert_matches_onnxruntime(m, feeds, DEVICES if op == "RNN" else [v for v in DEVICES if v != "opencl"])


def test_embedding_gather_counts_negative_positions_from_the_end():
    m = single("Gather", [helper.make_tensor_value_info("t", TensorProto.INT64, [5])], [5, 3],
               [weights("e", (7, 3))], axis=0)
    m.graph.node[0].input[:] = ["e", "t"]
    assert_matches_onnxruntime(m, {"t": np.array([0, 6, -1, -7, 3], np.int64)})


def test_shape_arithmetic_over_a_dynamic_batch_is_folded():
    """x.view(x.size(0), -1) as PyTorch exports it: Shape, Gather, Unsqueeze, Concat, Reshape."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)]
    m = model(nodes, [f32("x", ["N", 2, 3, 3])], [f32("y", ["N", 4])],
              [ints("zero", 0), ints("axes", [0]), ints("minus1", [-1]), weights("w", (4, 18))])
    assert_matches_onnxruntime(m, {"x": RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)})


def test_known_arithmetic_folds_as_onnxruntime_computes_it_without_the_reference_implementation():
    """Integer Div toward zero, Gather from the end, Cast, Identity, Squeeze and float Mul of
    known values: folded in NumPy at import (the reference implementation is never loaded) to
    what ONNX Runtime computes at run time."""
    nodes = [helper.make_node("Div", ["num", "den"], ["q"]),
             helper.make_node("Gather", ["q", "picks"], ["g"], axis=0),
             helper.make_node("Cast", ["g"], ["c"], to=TensorProto.FLOAT),
             helper.make_node("Identity", ["c"], ["i"]),
             helper.make_node("Unsqueeze", ["i", "axes"], ["u"]),
             helper.make_node("Squeeze", ["u", "axes"], ["v"]),
             helper.make_node("Mul", ["v", "half"], ["h"]),
             helper.make_node("Add", ["x", "h"], ["y"])]
    m = model(nodes, [f32("x", [4])], [f32("y", [4])],
              [ints("num", [-7, 7, -8, 9, 5]), ints("den", [2, -2, 3, 4, -5]), ints("picks", [0, -1, 1, 2]),
               ints("axes", [0]), numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    assert_matches_onnxruntime(m, {"x": RNG.standard_normal(4).astype(np.float32)}, devices=["cpu"])
    code = ("import sys, onnx, kiln.onnx; kiln.onnx.import_model(onnx.load_model_from_string(sys.stdin.buffer.read())); "
            "print('onnx.reference' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], input=m.SerializeToString(), capture_output=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)), check=True)
    assert done.stdout.decode().strip() == "False", done.stderr.decode()


def test_an_input_passed_through_to_an_output_stays_an_input():
    m = model([helper.make_node("Relu", ["a"], ["r"])], [f32("a", [2])], [f32("r", [2]), f32("a", [2])])
    got = kiln.onnx.compile(m)(a=np.array([-1, 3], np.float32))
    np.testing.assert_array_equal(got["r"], [0, 3])
    np.testing.assert_array_equal(got["a"], [-1, 3])


def test_a_size_times_a_number_is_a_dimension_and_a_product_of_two_sizes_is_declared_as_both():
    """Shape(x)[0] * 2 as a Reshape target: the dimension 2*N, whose rows read x through tables
    the program computes at each run (a param cannot have a size). Shape(x)[0] * Shape(x)[1] is
    no dimension a tensor can have: a Reshape to N * M rows declares them as N and M (and a Gemm
    over those rows keeps them so, until a Reshape splits them again); as a graph output it is
    refused, naming the node, until sizes= fixes one of the sizes."""
    def doubled(second):
        nodes = [helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
                 helper.make_node("Gather", ["s", "one"], ["m"], axis=0),
                 helper.make_node("Mul", ["n", second], ["n2"]),
                 helper.make_node("Unsqueeze", ["n2", "axes"], ["n2u"]),
                 helper.make_node("Concat", ["n2u", "minus1"], ["shape"], axis=0),
                 helper.make_node("Reshape", ["x", "shape"], ["y"])]
        return model(nodes, [f32("x", ["N", "M"])], [f32("y", ["R", "C"])],
                     [ints("zero", 0), ints("one", 1), ints("two", 2), ints("axes", [0]), ints("minus1", [-1])])
    m = doubled("two")
    run = kiln.onnx.compile(m, sizes={"M": 4})
    assert "f32[2*N, 2]" in kiln.onnx.import_text(m, sizes={"M": 4})[1]
    for rows in (3, 1, 6):
        x = RNG.standard_normal((rows, 4)).astype(np.float32)
        np.testing.assert_array_equal(run(x=x)["y"], onnxruntime_outputs(m, {"x": x})["y"])
    with pytest.raises(kiln.onnx.OnnxImportError,
                       match=r"node 'y'.*\(Reshape.*output 'y' is \['M\*N', 1\], with a dimension that is a product"):
        kiln.onnx.import_model(doubled("m"))
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    got = kiln.onnx.compile(doubled("m"), sizes={"M": 4})(x=x)["y"]
    np.testing.assert_array_equal(got, onnxruntime_outputs(doubled("m"), {"x": x})["y"])
    # Any other operator whose result would have such a dimension is refused where it is made.
    counting = model(doubled("m").graph.node[:4] + [helper.make_node("Range", ["zero", "n2", "one"], ["y"])],
                     [f32("x", ["N", "M"])], [helper.make_tensor_value_info("y", TensorProto.INT64, ["R"])],
                     [ints("zero", 0), ints("one", 1)])
    with pytest.raises(kiln.onnx.OnnxImportError, match=r"node 'y' \(Range.*the dimension M\*N, a product of sizes"):
        kiln.onnx.import_model(counting)


def test_rows_that_are_a_product_of_sizes_go_through_a_gemm_and_back():
    """What multi-head attention does with a batch of sequences, both sizes: x [T, B, 6] flattened
    to T * B rows, a Gemm with a bias (or a MatMul, an Add of the bias and a ReLU), and the rows
    split into [T, B, 4] again by a Reshape whose target comes from Shape: the flattened tensors
    are declared [T, B, ...] and the Shape of the product still says T * B rows. So too with T a
    number (rows 3*B, whose index would be divided by B to reach x's). Another operator reading
    them (a Softmax) is refused, naming it."""
    w = RNG.standard_normal((4, 6)).astype(np.float32)
    bias = RNG.standard_normal(4).astype(np.float32)

    def attention_tail(product="Gemm"):
        nodes = [helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Gather", ["s", "zero"], ["t"], axis=0),
                 helper.make_node("Gather", ["s", "one"], ["b"], axis=0),
                 helper.make_node("Mul", ["t", "b"], ["tb"]),
                 helper.make_node("Unsqueeze", ["tb", "axes"], ["tbu"]),
                 helper.make_node("Concat", ["tbu", "six"], ["flat"], axis=0),
                 helper.make_node("Reshape", ["x", "flat"], ["rows"])]
        if product == "Gemm":
            nodes.append(helper.make_node("Gemm", ["rows", "w", "bias"], ["g"], transB=1))
        elif product == "MatMul":
            nodes += [helper.make_node("MatMul", ["rows", "wt"], ["p"]),
                      helper.make_node("Add", ["p", "bias"], ["pb"]),
                      helper.make_node("Relu", ["pb"], ["g"])]
        else:
            nodes.append(helper.make_node(product, ["rows"], ["g"]))
        nodes += [helper.make_node("Shape", ["g"], ["gs"]),
                  helper.make_node("Gather", ["gs", "one"], ["width"], axis=0),
                  helper.make_node("Unsqueeze", ["t", "axes"], ["tu"]),
                  helper.make_node("Unsqueeze", ["b", "axes"], ["bu"]),
                  helper.make_node("Unsqueeze", ["width", "axes"], ["wu"]),
                  helper.make_node("Concat", ["tu", "bu", "wu"], ["back"], axis=0),
                  helper.make_node("Reshape", ["g", "back"], ["y"])]
        return model(nodes, [f32("x", ["T", "B", 6])], [f32("y", ["T", "B", 4 if product != "Softmax" else 6])],
                     [ints("zero", 0), ints("one", 1), ints("axes", [0]), ints("six", [6]),
                      numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.ascontiguousarray(w.T), "wt"),
                      numpy_helper.from_array(bias, "bias")])
    for product in ("Gemm", "MatMul"):
        m = attention_tail(product)
        text = kiln.onnx.import_text(m)[1]
        assert "tensor rows : f32[T, B, 6]" in text and "tensor g : f32[T, B, 4]" in text, text
        for device in DEVICES if product == "Gemm" else ("cpu",):
            run = kiln.onnx.compile(m, device=device)
            for t, b in ((3, 2), (1, 1), (5, 4)) if device == "cpu" else ((3, 2),):
                x = RNG.standard_normal((t, b, 6)).astype(np.float32)
                np.testing.assert_allclose(run(x=x)["y"], onnxruntime_outputs(m, {"x": x})["y"], rtol=1e-5,
                                           atol=1e-5, err_msg=f"{product}, T {t}, B {b} on {device}")
    m = attention_tail()
    assert "tensor rows : f32[3, B, 6]" in kiln.onnx.import_text(m, sizes={"T": 3})[1]
    run = kiln.onnx.compile(m, sizes={"T": 3})
    for b in (2, 1):
        x = RNG.standard_normal((3, b, 6)).astype(np.float32)
        np.testing.assert_allclose(run(x=x)["y"], onnxruntime_outputs(m, {"x": x})["y"], rtol=1e-5, atol=1e-5)
    with pytest.raises(kiln.onnx.OnnxImportError, match=r"\(Softmax.*reads 'rows', of shape \['B\*T', 6\]"):
        kiln.onnx.import_model(attention_tail("Softmax"))


def test_operators_whose_node_tests_are_of_an_old_opset_match_onnx_runtime():
    """Selu, Softsign and InstanceNormalization, whose node tests in libonnx-testdata are of
    opsets kiln does not import (1 and 6), at opset 17 against ONNX Runtime."""
    scale = RNG.standard_normal(3).astype(np.float32)
    shift = RNG.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("Selu", ["x"], ["a"], alpha=1.5, gamma=2.0),
             helper.make_node("Softsign", ["a"], ["b"]),
             helper.make_node("InstanceNormalization", ["b", "scale", "shift"], ["y"], epsilon=1e-3)]
    m = model(nodes, [f32("x", [2, 3, 4, 5])], [f32("y", [2, 3, 4, 5])],
              [numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(shift, "shift")])
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32) * 3
    want = onnxruntime_outputs(m, {"x": x})["y"]
    for device in DEVICES:
        np.testing.assert_allclose(kiln.onnx.compile(m, device=device)(x=x)["y"], want, rtol=1e-4, atol=1e-5,
                                   err_msg=device)


def test_einsum_equations_match_onnx_runtime():
    """Einsum as a statement: products with and without '->', a diagonal, a trace, '...'
    broadcast, and attention's batched product."""
    cases = [("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ii", [(4, 4)]),
             ("i,i->", [(7,), (7,)]), ("...ii->...i", [(2, 3, 3)]),
             ("ij,...j->...i", [(3, 4), (2, 1, 4)])]
    for equation, shapes in cases:
        names = [f"x{k}" for k in range(len(shapes))]
        feeds = {n: RNG.standard_normal(sh).astype(np.float32) for n, sh in zip(names, shapes)}
        want = np.einsum(equation, *feeds.values())
        m = model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                  [f32(n, list(sh)) for n, sh in zip(names, shapes)], [f32("y", list(want.shape))])
        want = onnxruntime_outputs(m, feeds)["y"]
        for device in DEVICES if equation in ("bhqd,bhkd->bhqk", "...ii->...i") else ("cpu",):
            np.testing.assert_allclose(kiln.onnx.compile(m, device=device)(**feeds)["y"], want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{equation} on {device}")
    with pytest.raises(kiln.onnx.OnnxImportError, match="each output letter once"):
        kiln.onnx.import_model(model([helper.make_node("Einsum", ["a"], ["y"], equation="ij->ik")],
                                     [f32("a", [2, 2])], [f32("y", [2, 2])]))


def test_cum_sum_and_tile_with_known_arguments_match_onnx_runtime():
    """CumSum along a known axis, each way and exclusive or not, and Tile by known repeats (their
    node tests give the axis and the repeats at run time, which kiln needs known)."""
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    for exclusive in (0, 1):
        for reverse in (0, 1):
            for axis in (1, -2):
                m = model([helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)],
                          [f32("x", [3, 5])], [f32("y", [3, 5])], [ints("axis", axis)])
                want = onnxruntime_outputs(m, {"x": x})["y"]
                for device in DEVICES if exclusive and reverse and axis == 1 else ("cpu",):
                    np.testing.assert_allclose(kiln.onnx.compile(m, device=device)(x=x)["y"], want, rtol=1e-5,
                                               atol=1e-6, err_msg=f"{exclusive=} {reverse=} {axis=} on {device}")
    m = model([helper.make_node("Tile", ["x", "repeats"], ["y"])], [f32("x", [3, 5])], [f32("y", [6, 15])],
              [ints("repeats", [2, 3])])
    for device in DEVICES:
        np.testing.assert_array_equal(kiln.onnx.compile(m, device=device)(x=x)["y"], np.tile(x, (2, 3)), err_msg=device)


def test_resize_with_known_scales_or_sizes_matches_onnx_runtime():
    """Resize (whose node tests give the scales or sizes at run time): nearest in each rounding
    and linear, in each coordinate transformation kiln takes, up and down, by scales and by sizes;
    and opset 9's Upsample."""
    x = RNG.standard_normal((1, 2, 5, 7)).astype(np.float32)
    cases = [("nearest", "asymmetric", "floor", [1, 1, 2, 2], None), ("nearest", "half_pixel", "round_prefer_floor",
             [1, 1, 1.5, 0.6], None), ("nearest", "align_corners", "round_prefer_ceil", None, [1, 2, 9, 4]),
             ("linear", "half_pixel", "round_prefer_floor", [1, 1, 2, 2], None),
             ("linear", "pytorch_half_pixel", "round_prefer_floor", None, [1, 2, 3, 11]),
             ("linear", "align_corners", "round_prefer_floor", [1, 1, 1.6, 0.5], None),
             ("linear", "asymmetric", "ceil", None, [1, 2, 10, 14])]
    for mode, transform, rounding, scales, sizes in cases:
        inits = [numpy_helper.from_array(np.zeros(0, np.float32), "roi")]
        names = ["x", "roi"]
        if scales is not None:
            inits.append(numpy_helper.from_array(np.array(scales, np.float32), "scales"))
            names.append("scales")
        else:
            inits += [numpy_helper.from_array(np.zeros(0, np.float32), "scales"), ints("sizes", sizes)]
            names += ["scales", "sizes"]
        node = helper.make_node("Resize", names, ["y"], mode=mode, coordinate_transformation_mode=transform,
                                nearest_mode=rounding)
        shape = sizes or [int(np.floor(n * s)) for n, s in zip(x.shape, scales)]
        m = model([node], [f32("x", list(x.shape))], [f32("y", shape)], inits)
        want = onnxruntime_outputs(m, {"x": x})["y"]
        for device in DEVICES if transform == "half_pixel" else ("cpu",):  # one nearest and one linear everywhere
            np.testing.assert_allclose(kiln.onnx.compile(m, device=device)(x=x)["y"], want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{mode} {transform} {rounding} on {device}")
    for mode in ("nearest", "linear"):  # Upsample, opset 9: Resize's asymmetric transformation
        m = model([helper.make_node("Upsample", ["x", "scales"], ["y"], mode=mode)], [f32("x", list(x.shape))],
                  [f32("y", [1, 2, 10, 21])], [numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "scales")],
                  opset=9)
        np.testing.assert_allclose(kiln.onnx.compile(m)(x=x)["y"], onnxruntime_outputs(m, {"x": x})["y"], rtol=1e-5,
                                   atol=1e-5, err_msg=f"Upsample {mode}")


def test_top_k_with_a_known_k_matches_onnx_runtime():
    """TopK (whose node tests give K at run time, which kiln needs known): the largest and the
    smallest 3 of rows with ties, values and i64 positions, the lower position first among equals."""
    for largest in (1, 0):
        m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=largest)], [f32("x", [4, 6])],
                  [f32("v", [4, 3]), helper.make_tensor_value_info("i", TensorProto.INT64, [4, 3])], [ints("k", [3])])
        x = RNG.integers(0, 4, (4, 6)).astype(np.float32)  # ties
        want = onnxruntime_outputs(m, {"x": x})
        for device in DEVICES:
            got = kiln.onnx.compile(m, device=device)(x=x)
            np.testing.assert_array_equal(got["v"], want["v"], err_msg=f"largest={largest} on {device}")
            np.testing.assert_array_equal(got["i"], want["i"], err_msg=f"largest={largest} on {device}")


def test_names_that_are_not_kiln_identifiers_are_mapped_both_ways():
    m = model([helper.make_node("Relu", ["gpu_0/data:0"], ["1st output"])], [f32("gpu_0/data:0", [2])],
              [f32("1st output", [2])])
    program = kiln.onnx.import_model(m)
    names = program.onnx_names
    assert set(names) == {"gpu_0/data:0", "1st output"}
    assert all(name.isidentifier() for name in names.values())
    out = kiln.onnx.compile(m)(**{"gpu_0/data:0": np.array([-1, 2], np.float32)})
    np.testing.assert_array_equal(out["1st output"], [0, 2])


@pytest.mark.parametrize("name", ["squeezenet", "resnet50"])
def test_the_onnx_wheels_light_models_match_onnxruntime(name):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"this onnx wheel has no {path}")
    m = onnx.load(path)
    initializers = {t.name for t in m.graph.initializer}
    (inp,) = [i for i in m.graph.input if i.name not in initializers]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    assert_matches_onnxruntime(m, {inp.name: RNG.standard_normal(shape).astype(np.float32)}, devices=["cpu"])


# Models exported by PyTorch (examples/onnx/export_models.py) under the interpreter this
# environment was made from, which has Debian's python3-torch and python3-torchvision where `make
# test` installed them (this environment has neither).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "onnx"))
from export_models import base_python, export_with_base_python  # noqa: E402


@pytest.fixture(scope="module")
def exported_models(tmp_path_factory):
    """torchvision's three models at 32x32 images (so that interp runs them in seconds), the
    GPT-style decoder in f32 and in bf16, and torch.nn.TransformerEncoder, exported once."""
    if subprocess.run([base_python(), "-c", "import torch, torchvision"], capture_output=True).returncode != 0:
        pytest.skip(f"{base_python()} has no PyTorch or torchvision (Debian's python3-torch and "
                    "python3-torchvision; `make test` installs them)")
    folder = tmp_path_factory.mktemp("exported")
    export_with_base_python(str(folder), ["resnet18", "mobilenet_v2", "squeezenet1_1", "gpt", "gpt_bf16", "encoder"],
                            size=32)
    return folder


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "squeezenet1_1"])
def test_torchvisions_models_match_onnxruntime_at_two_batches(exported_models, name):
    m = onnx.load(str(exported_models / f"{name}.onnx"))
    devices = DEVICES if name == "mobilenet_v2" else [d for d in DEVICES if d != "opencl"]
    for batch, devices in ((1, devices), (3, ["cpu"])):
        x = RNG.standard_normal((batch, 3, 32, 32)).astype(np.float32)
        assert_matches_onnxruntime(m, {"input": x}, devices=devices)


def test_a_gpt_style_decoder_runs_every_batch_and_sequence_from_one_compiled_program(exported_models):
    """int64 tokens, embeddings, causal self-attention whose mask is a slice of a buffer to the
    sequence's length, LayerNorm, GELU: batch and sequence are sizes."""
    m = onnx.load(str(exported_models / "gpt.onnx"))
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for device in DEVICES:
        run = kiln.onnx.compile(m, device=device)
        for batch, seq in ((1, 1), (2, 16), (3, 7)):
            tokens = RNG.integers(0, 512, (batch, seq)).astype(np.int64)
            want = session.run(None, {"tokens": tokens})[0]
            got = run(tokens=tokens)["logits"]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()),
                                       err_msg=f"batch {batch}, sequence {seq} on {device}")


def test_a_transformer_encoder_runs_every_sequence_from_one_compiled_program(exported_models):
    """torch.nn.TransformerEncoder (2 layers of width 256, 4 heads): multi-head attention with its
    reshapes and transposes, batched products, softmax, LayerNorm and a ReLU MLP. Its attention
    reshapes to seq * batch rows: with both sizes dynamic those rows are declared as the two
    sizes, and one program runs every batch and sequence; with the batch given a number, the
    sequence stays a size (rows of 8*seq, read through tables the program computes); with the
    sequence given, rows of 8*batch declared as 8 and the batch."""
    m = onnx.load(str(exported_models / "encoder.onnx"))
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])

    def check(run, batch, seq, device):
        x = RNG.standard_normal((batch, seq, 256)).astype(np.float32)
        want = session.run(None, {"input": x})[0]
        np.testing.assert_allclose(run(input=x)["output"], want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()),
                                   err_msg=f"batch {batch}, sequence {seq} on {device}")
    for device in DEVICES:
        run = kiln.onnx.compile(m, device=device)
        for batch, seq in ((2, 8),) if device != "cpu" else ((2, 8), (3, 33), (1, 1)):
            check(run, batch, seq, device)
    run = kiln.onnx.compile(m, sizes={"batch": 3})
    for seq in (8, 1):
        check(run, 3, seq, "cpu")
    run = kiln.onnx.compile(m, sizes={"seq": 8})
    for batch in (2, 1):
        check(run, batch, 8, "cpu")


def test_a_bf16_model_matches_pytorch(exported_models):
    """The decoder with bf16 weights and activations, against PyTorch (ONNX Runtime does not run
    bf16 on the CPU): kiln computes each statement in f32 and rounds once where it stores, so it
    is as close to the same weights computed in f32 as PyTorch's eager bf16, which rounds every
    operation (docs/language.md)."""
    m = onnx.load(str(exported_models / "gpt_bf16.onnx"))
    reference = np.load(str(exported_models / "gpt_bf16.reference.npz"))
    for device in DEVICES:
        got = kiln.onnx.compile(m, device=device)(tokens=reference["tokens"])["logits"]
        assert got.dtype.name == "bfloat16", got.dtype
        got = got.astype(np.float32)
        scale = float(np.abs(reference["f32"]).max())
        eager = float(np.abs(reference["bf16"] - reference["f32"]).max()) / scale
        ours = float(np.abs(got - reference["f32"]).max()) / scale
        assert ours <= max(2e-2, 1.5 * eager), (device, ours, eager)
        assert float(np.abs(got - reference["bf16"]).max()) / scale <= 4e-2, device


def with_float_type(m, elem):
    """A copy of model `m` whose f32 and f16 tensors are all of `elem` (TensorProto.FLOAT16 or
    FLOAT), converted with the onnx package's helpers: initializers, inputs, outputs, value_info,
    the tensors of Constant and ConstantOfShape, and Cast's target."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    floats = (TensorProto.FLOAT, TensorProto.FLOAT16)
    np_type = np.float16 if elem == TensorProto.FLOAT16 else np.float32

    def convert(t):
        if t.data_type in floats and t.data_type != elem:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np_type), t.name))

    for t in out.graph.initializer:
        convert(t)
    for v in list(out.graph.input) + list(out.graph.output) + list(out.graph.value_info):
        if v.type.tensor_type.elem_type in floats:
            v.type.tensor_type.elem_type = elem
    for node in out.graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                convert(a.t)
            elif node.op_type == "Cast" and a.name == "to" and a.i in floats:
                a.i = elem
    return out


def test_an_f16_model_matches_onnxruntime(exported_models):
    """The decoder converted to f16 weights and activations, against ONNX Runtime running the same
    f16 model, and both against its weights computed in f32. kiln rounds every tensor the model
    declares f16 (docs/onnx.md); ONNX Runtime rounds the outputs of the operators it does not fuse.
    Both stay within a small part of the largest logit (2026-11-30: kiln 7.2e-4, ONNX Runtime
    3.9e-4, kiln from ONNX Runtime 8.8e-4)."""
    m16 = with_float_type(onnx.load(str(exported_models / "gpt.onnx")), TensorProto.FLOAT16)
    m32 = with_float_type(m16, TensorProto.FLOAT)  # the same (rounded) weights, in f32
    tokens = RNG.integers(0, 512, (2, 16)).astype(np.int64)
    run = {name: ort.InferenceSession(x.SerializeToString(), providers=["CPUExecutionProvider"])
           for name, x in (("f16", m16), ("f32", m32))}
    wide = run["f32"].run(None, {"tokens": tokens})[0]
    theirs = run["f16"].run(None, {"tokens": tokens})[0]
    assert theirs.dtype == np.float16
    scale = float(np.abs(wide).max())
    theirs_off = float(np.abs(theirs.astype(np.float32) - wide).max()) / scale
    for device in DEVICES:
        got = kiln.onnx.compile(m16, device=device)(tokens=tokens)["logits"]
        assert got.dtype == np.float16, got.dtype
        got = got.astype(np.float32)
        ours_off = float(np.abs(got - wide).max()) / scale
        assert ours_off <= max(5e-3, 4 * theirs_off), (device, ours_off, theirs_off)
        assert float(np.abs(got - theirs.astype(np.float32)).max()) / scale <= 1e-2, device


# --- what kiln cannot import -----------------------------------------------------------------

def test_a_file_that_is_not_onnx_is_refused(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07this is not a model\xff\xff")
    with pytest.raises(kiln.onnx.OnnxImportError, match="bad.onnx"):
        kiln.onnx.import_model(str(bad))
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(small_cnn().SerializeToString()[:200])
    with pytest.raises(kiln.onnx.OnnxImportError, match="truncated.onnx"):
        kiln.onnx.import_model(str(truncated))
    with pytest.raises(FileNotFoundError):
        kiln.onnx.import_model(str(tmp_path / "missing.onnx"))


def test_an_unsupported_operator_is_named_with_its_node_and_opset():
    m = model([helper.make_node("NonZero", ["a"], ["y"], name="pick")], [f32("a", [2, 3])],
              [helper.make_tensor_value_info("y", TensorProto.INT64, [2, "n"])])
    with pytest.raises(kiln.onnx.OnnxImportError, match=r"node 'pick' \(NonZero, opset 17\).*not supported"):
        kiln.onnx.import_model(m)


def test_an_opset_outside_kilns_range_is_refused():
    m = model([helper.make_node("Relu", ["a"], ["y"])], [f32("a", [2])], [f32("y", [2])], opset=6)
    with pytest.raises(kiln.onnx.OnnxImportError, match="opset 6"):
        kiln.onnx.import_model(m)


def test_a_graph_out_of_order_is_refused():
    nodes = [helper.make_node("Relu", ["t"], ["y"]), helper.make_node("Relu", ["a"], ["t"])]
    graph = helper.make_graph(nodes, "cycle", [f32("a", [2])], [f32("y", [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(kiln.onnx.OnnxImportError, match="topologically sorted"):
        kiln.onnx.import_model(m)


def test_an_initializer_shorter_than_its_shape_is_refused():
    short = TensorProto(name="w", dims=[4], data_type=TensorProto.FLOAT, raw_data=b"\x00" * 8)
    graph = helper.make_graph([helper.make_node("Add", ["a", "w"], ["y"])], "short", [f32("a", [4])], [f32("y", [4])],
                              [short])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(kiln.onnx.OnnxImportError, match="tensor name: w|'w'"):
        kiln.onnx.import_model(m)


def test_an_input_of_the_wrong_shape_or_type_is_refused_at_run_time():
    run = kiln.onnx.compile(small_cnn())
    with pytest.raises(ValueError, match="x"):
        run(x=np.zeros((2, 3, 15, 16), np.float32))
    with pytest.raises(ValueError, match="float64"):
        run(x=np.zeros((2, 3, 16, 16), np.float64))
    with pytest.raises(ValueError, match="no input 'z'"):
        run(z=np.zeros(3, np.float32))


def test_the_command_line_writes_a_model_that_kiln_run_runs(tmp_path):
    out = tmp_path / "model"
    path = tmp_path / "cnn.onnx"
    cnn = small_cnn()
    onnx.save(cnn, str(path))
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "kiln.onnx", str(path), "-o", str(out)], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert (out / "model.kiln").exists() and len(list((out / "params").glob("*.npy"))) >= 5
    command = r.stdout.strip().splitlines()[-1].split()
    assert command[:3] == ["kiln", "run", str(out / "model.kiln")]
    binary = os.environ.get("KILN_BINARY")
    if binary:
        x = RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        ran = subprocess.run([binary, *command[1:], "--input", f"x={tmp_path / 'x.npy'}", "--output",
                              f"y={tmp_path / 'y.npy'}"], capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        np.testing.assert_allclose(np.load(tmp_path / "y.npy"), onnxruntime_outputs(cnn, {"x": x})["y"],
                                   rtol=1e-4, atol=1e-6)
    # A second import into the same, now full, folder is refused and changes nothing.
    before = sorted(p.name for p in out.rglob("*"))
    again = subprocess.run([sys.executable, "-m", "kiln.onnx", str(path), "-o", str(out)], capture_output=True,
                           text=True, env=env)
    assert again.returncode == 1 and "not an empty folder" in again.stderr
    assert sorted(p.name for p in out.rglob("*")) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".kiln-onnx-")]
