"""The work of `make bench-peers`, written once per peer: kiln's programs, IREE's MLIR, the shapes
the Python peers make inputs of, and the half-moons data of the training row; the digits row's
data comes from examples/digits."""
import math
import os

import numpy as np

MLP_POINTS = 8192  # an epoch of examples/train_moons: 4 batches of 2048
DIGITS_EPOCHS = 10
# examples/digits/digits_data.py: the data, initial weights and batch order that PyTorch shares
# with examples/digits/train_digits.py.
DIGITS_EXAMPLE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples/digits"))
# examples/transformer: decoder_block.kiln, and decoder_reference.py, which writes the same block
# for PyTorch.
TRANSFORMER_EXAMPLE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "../../examples/transformer"))
DECODER_LENGTH = 32
# examples/onnx/export_models.py: the PyTorch modules of the model rows, which peers.py exports to
# ONNX into the folder named by KILN_PEERS_MODELS for kiln and ONNX Runtime.
ONNX_EXAMPLE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples/onnx"))
# (model, batch, runs per round): inference on 224 x 224 images, the decoder on 64 tokens, the
# encoder on 128.
MODEL_ROWS = (("resnet50", 1, 10), ("resnet50", 16, 2), ("resnet18", 1, 20), ("resnet18", 16, 3),
              ("mobilenet_v2", 1, 40), ("mobilenet_v2", 16, 5), ("squeezenet1_1", 1, 40), ("squeezenet1_1", 16, 5),
              ("encoder", 8, 10), ("gpt", 1, 100), ("gpt", 16, 20))
MODEL_WARMUP = 24  # runs before the timed ones, for every contender (kiln chooses its kernels' threads over their first 23)

MODEL_WHAT = {"resnet50": "torchvision, 224²", "resnet18": "torchvision, 224²", "mobilenet_v2": "torchvision, 224²",
              "squeezenet1_1": "torchvision, 224²",
              "encoder": "torch.nn.TransformerEncoder, 2 layers of 256, 128 tokens",
              "gpt": "GPT-style decoder of examples/onnx, 64 tokens"}
MODEL_INPUT = {"resnet50": lambda b: (b, 3, 224, 224), "resnet18": lambda b: (b, 3, 224, 224),
               "mobilenet_v2": lambda b: (b, 3, 224, 224), "squeezenet1_1": lambda b: (b, 3, 224, 224),
               "encoder": lambda b: (b, 128, 256), "gpt": lambda b: (b, 64)}

# name: what the row says, input shapes, repetitions per round (about 0.1–1 s of work).
TASKS = {
    "matmul512": {"what": "512³ f32 matrix product", "inputs": [(512, 512), (512, 512)], "reps": 20},
    "matmul1024": {"what": "1024³ f32 matrix product", "inputs": [(1024, 1024), (1024, 1024)], "reps": 5},
    "softmax": {"what": "row softmax 4096×1024", "inputs": [(4096, 1024)], "reps": 20},
    "rowsum": {"what": "row sum 4096×1024", "inputs": [(4096, 1024)], "reps": 50},
    "relu_fma": {"what": "relu(a·b + c) over 2^24 f32", "inputs": [(1 << 24,)] * 3, "reps": 10},
    # Element types (language version 3): `dtype` bf16 makes the peers' inputs bf16 (kiln's come
    # from `kiln run`'s random inputs of the declared types); peers without bf16 skip the row.
    "matmul1024_bf16": {"what": "1024³ product, bf16 operands (kiln: f32 result through gemm; PyTorch: torch.matmul "
                                "of bf16)", "inputs": [(1024, 1024), (1024, 1024)], "reps": 10, "dtype": "bf16"},
    "relu_fma_bf16": {"what": "relu(a·b + c) over 2^24 bf16", "inputs": [(1 << 24,)] * 3, "reps": 10, "dtype": "bf16"},
    "tiny_add": {"what": "launch: y = a + b on 256 f32, run to completion", "inputs": [(256,), (256,)],
                 "reps": 2000},
    # `int_inputs`: which inputs are i32 positions into dimension 0 of the first input; kiln reads
    # this task's inputs, named `input_names`, from .npy files.
    "embedding": {"what": "embedding lookup e[t[i], j]: 65536 rows of 128 f32 from a 32768-row table (NumPy: take)",
                  "inputs": [(32768, 128), (65536,)], "int_inputs": [1], "input_names": ["e", "t"], "reps": 50},
    "mlp_epoch": {"what": "half-moons MLP, one training epoch (8192 points, batch 2048)", "inputs": [],
                  "reps": 20},
    # A program with a size (language version 2): one compiled program, run at each batch size
    # with `kiln run --size B=...`; the peers run the same layer on inputs of that batch.
    **{f"sized_dense_{b}": {"what": f"sized program (`size B`): dense layer relu(x·w + b), 256 → 256, B = {b}",
                            "inputs": [(b, 256), (256, 256), (256,)], "reps": reps, "sizes": {"B": b}}
       for b, reps in ((1, 2000), (64, 1000), (4096, 20))},
    # One GPT-style decoder block's forward pass (a program with two sizes, B and T), at batch 1
    # and 8: kiln runs examples/transformer/decoder_block.kiln with its initial parameters,
    # PyTorch the same block written as nanoGPT writes it, with parameters of the same shapes.
    **{f"decoder_block_{b}": {"what": f"decoder block (examples/transformer: width 64, 4 heads, MLP 256, causal), "
                                      f"forward pass, B = {b}, T = {DECODER_LENGTH}",
                              "inputs": [(b, DECODER_LENGTH, 64)], "reps": reps,
                              "sizes": {"B": b, "T": DECODER_LENGTH}}
       for b, reps in ((1, 500), (8, 100))},
    # Models exported from PyTorch to ONNX (examples/onnx/export_models.py, random weights): kiln
    # imports the file (`python -m kiln.onnx`, the batch a size but for the encoder's, given
    # numbers as docs/onnx.md says) and runs it with `kiln run`; ONNX Runtime runs the file;
    # PyTorch runs the module it was exported from, eager, under torch.inference_mode().
    **{f"model_{name}_{b}": {"what": f"{name} inference ({MODEL_WHAT[name]}), batch {b}", "model": name, "batch": b,
                             "inputs": [MODEL_INPUT[name](b)], "reps": reps,
                             **({"tokens": 512} if name == "gpt" else {})}
       for name, b, reps in MODEL_ROWS},
    # reps: epochs per round, each round training afresh; the accuracy is the test set's after them.
    "digits": {"what": f"digits CNN (examples/digits), one training epoch (1437 images, batch 64; kiln on "
                       f"2 streams), test accuracy after {DIGITS_EPOCHS} epochs", "inputs": [],
               "reps": DIGITS_EPOCHS},
}


def task_inputs(task, seed=1):
    """The task's inputs: standard normal f32, in-range i32 positions for `int_inputs`, and a
    model's int64 tokens below `tokens`."""
    rng = np.random.default_rng(seed)
    shapes, ints = TASKS[task]["inputs"], TASKS[task].get("int_inputs", [])
    if "tokens" in TASKS[task]:
        return [rng.integers(0, TASKS[task]["tokens"], shape, dtype=np.int64) for shape in shapes]
    return [rng.integers(0, shapes[0][0], shape, dtype=np.int32) if i in ints
            else rng.standard_normal(shape, dtype=np.float32) for i, shape in enumerate(shapes)]


def kiln_program(task):
    """The task in kiln's language (None: kiln runs it another way, the training demo)."""
    if task == "embedding":
        return ("input e : f32[32768, 128]\ninput t : i32[65536]\noutput out : f32[65536, 128]\n"
                "out[i, j] = e[t[i], j]\n")
    if task == "matmul1024_bf16":
        return ("input a : bf16[1024, 1024]\ninput b : bf16[1024, 1024]\noutput c : f32[1024, 1024]\n"
                "call gemm(a, b) -> c\n")
    if task == "relu_fma_bf16":
        n = 1 << 24
        return (f"input a : bf16[{n}]\ninput b : bf16[{n}]\ninput c : bf16[{n}]\noutput y : bf16[{n}]\n"
                "y[i] = relu(a[i] * b[i] + c[i])\n")
    if task.startswith("matmul"):
        n = 512 if task == "matmul512" else 1024
        return (f"input a : f32[{n}, {n}]\ninput b : f32[{n}, {n}]\noutput c : f32[{n}, {n}]\n"
                "c[i, j] = sum(a[i, k] * b[k, j])\n")
    if task == "softmax":
        return ("input x : f32[4096, 1024]\noutput y : f32[4096, 1024]\ntensor m : f32[4096]\n"
                "tensor e : f32[4096, 1024]\ntensor s : f32[4096]\n"
                "m[i] = max(x[i, j])\ne[i, j] = exp(x[i, j] - m[i])\ns[i] = sum(e[i, j])\ny[i, j] = e[i, j] / s[i]\n")
    if task == "rowsum":
        return "input x : f32[4096, 1024]\noutput y : f32[4096]\ny[i] = sum(x[i, j])\n"
    if task == "relu_fma":
        n = 1 << 24
        return (f"input a : f32[{n}]\ninput b : f32[{n}]\ninput c : f32[{n}]\noutput y : f32[{n}]\n"
                "y[i] = relu(a[i] * b[i] + c[i])\n")
    if task == "tiny_add":
        return "input a : f32[256]\ninput b : f32[256]\noutput y : f32[256]\ny[i] = a[i] + b[i]\n"
    if task.startswith("decoder_block_"):
        with open(os.path.join(TRANSFORMER_EXAMPLE, "decoder_block.kiln")) as f:
            return f.read()
    if task.startswith("sized_dense_"):
        # The product is a statement of its own, so that it becomes a `gemm` call.
        return ("size B\ninput x : f32[B, 256]\ninput w : f32[256, 256]\ninput b : f32[256]\n"
                "output y : f32[B, 256]\ntensor z : f32[B, 256]\n"
                "z[n, j] = sum(x[n, i] * w[i, j])\ny[n, j] = relu(z[n, j] + b[j])\n")
    return None


def _elementwise(n, count, body):
    t = f"tensor<{n}xf32>"
    args = ", ".join(f"%a{i}: {t}" for i in range(count))
    ins = ", ".join(f"%a{i}" for i in range(count))
    block = ", ".join(f"%x{i}: f32" for i in range(count)) + ", %o: f32"
    maps = ", ".join(["#m"] * (count + 1))
    return f"""#m = affine_map<(i) -> (i)>
func.func @main({args}) -> {t} {{
  %e = tensor.empty() : {t}
  %r = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
      ins({ins} : {", ".join([t] * count)}) outs(%e : {t}) {{
  ^bb0({block}):
{body}
  }} -> {t}
  return %r : {t}
}}
"""


def mlir(task):
    """The task for IREE, in the linalg dialect."""
    if task.startswith("matmul"):
        n = 512 if task == "matmul512" else 1024
        t = f"tensor<{n}x{n}xf32>"
        return f"""func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {t}
  %f = linalg.fill ins(%z : f32) outs(%e : {t}) -> {t}
  %r = linalg.matmul ins(%a, %b : {t}, {t}) outs(%f : {t}) -> {t}
  return %r : {t}
}}
"""
    if task == "softmax":
        t = "tensor<4096x1024xf32>"
        return f"""func.func @main(%x: {t}) -> {t} {{
  %e = tensor.empty() : {t}
  %r = linalg.softmax dimension(1) ins(%x : {t}) outs(%e : {t}) -> {t}
  return %r : {t}
}}
"""
    if task == "rowsum":
        return """#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (i)>
func.func @main(%x: tensor<4096x1024xf32>) -> tensor<4096xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4096xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4096xf32>) -> tensor<4096xf32>
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4096x1024xf32>) outs(%f : tensor<4096xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4096xf32>
  return %r : tensor<4096xf32>
}
"""
    if task == "relu_fma":
        return _elementwise(1 << 24, 3, """    %z = arith.constant 0.0 : f32
    %p = arith.mulf %x0, %x1 : f32
    %s = arith.addf %p, %x2 : f32
    %y = arith.maximumf %s, %z : f32
    linalg.yield %y : f32""")
    if task == "tiny_add":
        return _elementwise(256, 2, """    %y = arith.addf %x0, %x1 : f32
    linalg.yield %y : f32""")
    raise ValueError(task)


def onnx_model(task):
    """The task for ONNX Runtime: a model of its operators at the task's shapes (a sized task's
    batch dimension named, as an exporter writes a dynamic one), or None where it is not written."""
    from onnx import TensorProto, helper
    shapes = TASKS[task]["inputs"]
    names = "x" if len(shapes) == 1 else "abc"

    def tensor(name, shape, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, list(shape))

    inputs = [tensor(n, s) for n, s in zip(names, shapes)]
    if task.startswith("matmul") and "dtype" not in TASKS[task]:
        nodes, out = [helper.make_node("MatMul", ["a", "b"], ["y"])], shapes[0]
    elif task == "softmax":
        nodes, out = [helper.make_node("Softmax", ["x"], ["y"], axis=1)], shapes[0]
    elif task == "rowsum":
        axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
        return _onnx(task, [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], inputs,
                     [tensor("y", shapes[0][:1])], [axes])
    elif task == "relu_fma":
        nodes = [helper.make_node("Mul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "c"], ["s"]),
                 helper.make_node("Relu", ["s"], ["y"])]
        out = shapes[0]
    elif task == "tiny_add":
        nodes, out = [helper.make_node("Add", ["a", "b"], ["y"])], shapes[0]
    elif task == "embedding":
        inputs = [tensor("e", shapes[0]), tensor("t", shapes[1], TensorProto.INT32)]
        nodes, out = [helper.make_node("Gather", ["e", "t"], ["y"], axis=0)], (shapes[1][0], shapes[0][1])
    elif task.startswith("sized_dense_"):
        inputs = [tensor("a", ("B", 256)), tensor("b", (256, 256)), tensor("c", (256,))]
        nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "c"], ["s"]),
                 helper.make_node("Relu", ["s"], ["y"])]
        out = ("B", 256)
    else:
        return None
    return _onnx(task, nodes, inputs, [tensor("y", out)])


def _onnx(task, nodes, inputs, outputs, initializers=()):
    from onnx import helper
    graph = helper.make_graph(nodes, task, inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def moons(count, noise=0.1, seed=0):
    """Two interleaved half circles with Gaussian noise, shuffled; labels 0/1 (as train_moons makes them)."""
    rng = np.random.default_rng(seed)
    half = count // 2
    t = rng.uniform(0, math.pi, count)
    x = np.empty((count, 2), np.float32)
    x[:half, 0], x[:half, 1] = np.cos(t[:half]), np.sin(t[:half])
    x[half:, 0], x[half:, 1] = 1 - np.cos(t[half:]), 0.5 - np.sin(t[half:])
    x += rng.normal(0, noise, x.shape).astype(np.float32)
    y = np.concatenate([np.zeros(half), np.ones(count - half)]).astype(np.float32)
    order = rng.permutation(count)
    return x[order], y[order]
