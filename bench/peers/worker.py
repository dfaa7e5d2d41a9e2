#!/usr/bin/env python3
"""One peer of `make bench-peers` (bench/peers/peers.py) as a long-lived process: it reads
"TASK REPS" lines on stdin, runs the task REPS times after a warm-up, and answers one JSON line,
{"ms": median} or {"skip": why}; the digits task trains REPS epochs from scratch and answers
{"ms": median epoch, "accuracy": test accuracy}. Inputs are made and compiled once per task,
outside the timing; every timed call leaves its result complete (synchronized) and writes into
preallocated output where the library lets it.

    worker.py torch|numpy|iree|tinygrad|onnxruntime THREADS
"""
import json
import os
import statistics
import sys
import time

import numpy as np

from tasks import (DIGITS_EXAMPLE, MLP_POINTS, MODEL_WARMUP, ONNX_EXAMPLE, TASKS, TRANSFORMER_EXAMPLE, mlir, moons,
                   onnx_model, task_inputs)

# Tasks that train; "digits" trains afresh each round to report an accuracy as well.
TRAINING = {"mlp_epoch", "digits"}
TRAINED_AFRESH = {"digits"}

PEER = sys.argv[1]
THREADS = int(sys.argv[2])


def timed(fn, reps, warmup=1):
    for _ in range(warmup):  # compilation, caches, first-touch
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def inputs(task, seed=1):
    return task_inputs(task, seed)


# --- the MLP of examples/kiln/moons_mlp.kiln: 2 -> 16 -> 16 -> 1, tanh, sigmoid, summed BCE, SGD ---
LR = 0.0005
BATCH = 2048


def numpy_epoch_fn():
    x, y = moons(MLP_POINTS)
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((2, 16)) * 0.8).astype(np.float32)
    w2 = (rng.standard_normal((16, 16)) * 0.3).astype(np.float32)
    w3 = (rng.standard_normal(16) * 0.3).astype(np.float32)
    b1, b2, b3 = np.zeros(16, np.float32), np.zeros(16, np.float32), np.float32(0)
    params = [w1, b1, w2, b2, w3, b3]

    def epoch():
        w1, b1, w2, b2, w3, b3 = params
        for s in range(0, MLP_POINTS, BATCH):
            xb, yb = x[s:s + BATCH], y[s:s + BATCH]
            h1 = np.tanh(xb @ w1 + b1)
            h2 = np.tanh(h1 @ w2 + b2)
            p = 1 / (1 + np.exp(-(h2 @ w3 + b3)))
            d3 = p - yb
            d2 = np.outer(d3, w3) * (1 - h2 * h2)
            d1 = (d2 @ w2.T) * (1 - h1 * h1)
            w3 -= LR * (h2.T @ d3)
            b3 = b3 - LR * d3.sum()
            w2 -= LR * (h1.T @ d2)
            b2 -= LR * d2.sum(0)
            w1 -= LR * (xb.T @ d1)
            b1 -= LR * d1.sum(0)
        params[5] = b3

    return epoch


def torch_epoch_fn(torch):
    x, y = moons(MLP_POINTS)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 1), torch.nn.Sigmoid())
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = torch.nn.BCELoss(reduction="sum")

    def epoch():
        for s in range(0, MLP_POINTS, BATCH):
            optimizer.zero_grad()
            loss = loss_fn(model(x[s:s + BATCH]).squeeze(1), y[s:s + BATCH])
            loss.backward()
            optimizer.step()

    return epoch


# --- the CNN of examples/digits/digits_cnn.kiln: conv 3x3 1 -> 8 (padding 1), relu, dense 512 -> 10 ---
def torch_digits_fn(torch):
    """A function of the number of epochs that trains afresh from examples/digits' initial
    weights, in its batch order, and answers {"ms": median epoch, "accuracy": test accuracy}."""
    sys.path.insert(0, DIGITS_EXAMPLE)
    import digits_data
    train_x, train_y, test_x, test_y = (torch.from_numpy(a) for a in digits_data.split(*digits_data.load()))
    train_y, test_y = train_y.long(), test_y.long()
    lr = 0.2 / 64  # digits_cnn.kiln's lr, for gradients summed over the batch

    def run(epochs):
        p = digits_data.initial_parameters(0)
        conv = torch.nn.Conv2d(1, digits_data.CHANNELS, 3, padding=1)
        dense = torch.nn.Linear(512, digits_data.CLASSES)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(p["wc"][:, None]))  # kiln's wc[o, ky, kx]
            conv.bias.copy_(torch.from_numpy(p["bc"]))
            # kiln's wd[o, y, x, k] against the flattened [o, y, x] features.
            dense.weight.copy_(torch.from_numpy(p["wd"].reshape(512, digits_data.CLASSES).T.copy()))
            dense.bias.copy_(torch.from_numpy(p["bd"]))
        model = torch.nn.Sequential(conv, torch.nn.ReLU(), torch.nn.Flatten(), dense)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
        times = []
        for epoch in range(epochs):
            t0 = time.perf_counter()
            order = torch.from_numpy(digits_data.batch_order(len(train_y), epoch, 0))
            xs, ys = train_x[order].unsqueeze(1), train_y[order]
            for s in range(0, len(ys), 64):
                optimizer.zero_grad()
                loss_fn(model(xs[s:s + 64]), ys[s:s + 64]).backward()
                optimizer.step()
            times.append((time.perf_counter() - t0) * 1e3)
        with torch.no_grad():
            accuracy = float((model(test_x.unsqueeze(1)).argmax(1) == test_y).float().mean())
        # As train_digits.py: the first epoch is the warm-up, left out of the median.
        return {"ms": statistics.median(times[1:] or times), "accuracy": accuracy}

    return run


# --- the peers: make(task) returns the function to time, or raises Skip ---
class Skip(Exception):
    pass


def model_file(task):
    """The ONNX file of a model row, which peers.py exported; Skip where it could not."""
    folder = os.environ.get("KILN_PEERS_MODELS", "")
    path = os.path.join(folder, TASKS[task]["model"] + ".onnx")
    if not folder or not os.path.exists(path):
        raise Skip("the model was not exported (PyTorch and torchvision missing?)")
    return path


def make_numpy(task):
    if "model" in TASKS[task]:
        raise Skip("models are not written for NumPy here")
    if TASKS[task].get("dtype") == "bf16":
        raise Skip("bf16 is not written for this peer here")
    if task == "mlp_epoch":
        return numpy_epoch_fn()
    if task == "digits":
        raise Skip("training is not written for NumPy here")
    if task.startswith("decoder_block_"):
        raise Skip("the decoder block is not written for NumPy here (NumPy has no erf for exact GELU)")
    ins = inputs(task)
    if task.startswith("matmul"):
        a, b = ins
        out = np.empty_like(a)
        return lambda: np.matmul(a, b, out=out)
    if task == "softmax":
        (x,) = ins
        e, m, s = np.empty_like(x), np.empty((x.shape[0], 1), np.float32), np.empty((x.shape[0], 1), np.float32)

        def softmax():
            np.max(x, axis=1, keepdims=True, out=m)
            np.subtract(x, m, out=e)
            np.exp(e, out=e)
            np.sum(e, axis=1, keepdims=True, out=s)
            np.divide(e, s, out=e)
        return softmax
    if task == "rowsum":
        (x,) = ins
        out = np.empty(x.shape[0], np.float32)
        return lambda: np.sum(x, axis=1, out=out)
    if task == "relu_fma":
        a, b, c = ins
        out = np.empty_like(a)

        def relu_fma():
            np.multiply(a, b, out=out)
            np.add(out, c, out=out)
            np.maximum(out, 0, out=out)
        return relu_fma
    if task == "tiny_add":
        a, b = ins
        out = np.empty_like(a)
        return lambda: np.add(a, b, out=out)
    if task == "embedding":
        e, t = ins
        out = np.empty((t.shape[0], e.shape[1]), np.float32)
        return lambda: np.take(e, t, axis=0, out=out)
    if task.startswith("sized_dense_"):
        x, w, b = ins
        out = np.empty((x.shape[0], w.shape[1]), np.float32)

        def dense():
            np.matmul(x, w, out=out)
            np.add(out, b, out=out)
            np.maximum(out, 0, out=out)
        return dense
    raise Skip("no such task")


def make_torch(task):
    import torch
    torch.set_num_threads(THREADS)
    if "model" in TASKS[task]:
        import torchvision
        sys.path.insert(0, ONNX_EXAMPLE)
        import export_models
        model = export_models.model_of(torch, torchvision, TASKS[task]["model"])[0]
        (x,) = [torch.from_numpy(a) for a in inputs(task)]

        def infer():
            with torch.inference_mode():
                model(x)
        return infer
    if task == "mlp_epoch":
        return torch_epoch_fn(torch)
    if task == "digits":
        return torch_digits_fn(torch)
    if task.startswith("decoder_block_"):
        sys.path.insert(0, TRANSFORMER_EXAMPLE)
        import decoder_reference
        (x,) = inputs(task)
        forward = decoder_reference.torch_block(torch, decoder_reference.random_parameters())
        x = torch.from_numpy(x)
        return lambda: forward(x)
    ins = [torch.from_numpy(a) for a in inputs(task)]
    if TASKS[task].get("dtype") == "bf16":
        ins = [a.bfloat16() for a in ins]
    if task == "matmul1024_bf16":
        a, b = ins
        out = torch.empty_like(a)
        return lambda: torch.matmul(a, b, out=out)
    if task == "relu_fma_bf16":
        a, b, c = ins
        out = torch.empty_like(a)

        def relu_fma_bf16():
            torch.addcmul(c, a, b, out=out)
            out.relu_()
        return relu_fma_bf16
    if task.startswith("matmul"):
        a, b = ins
        out = torch.empty_like(a)
        return lambda: torch.matmul(a, b, out=out)
    if task == "softmax":
        (x,) = ins
        out = torch.empty_like(x)
        return lambda: torch.softmax(x, 1, out=out)
    if task == "rowsum":
        (x,) = ins
        out = torch.empty(x.shape[0])
        return lambda: torch.sum(x, 1, out=out)
    if task == "relu_fma":
        a, b, c = ins
        out = torch.empty_like(a)

        def relu_fma():
            torch.addcmul(c, a, b, out=out)
            out.relu_()
        return relu_fma
    if task == "tiny_add":
        a, b = ins
        out = torch.empty_like(a)
        return lambda: torch.add(a, b, out=out)
    if task == "embedding":
        e, t = ins
        t = t.long()  # index_select takes int64 positions
        out = torch.empty((t.shape[0], e.shape[1]))
        return lambda: torch.index_select(e, 0, t, out=out)
    if task.startswith("sized_dense_"):
        x, w, b = ins
        out = torch.empty((x.shape[0], w.shape[1]))

        def dense():
            torch.addmm(b, x, w, out=out)
            out.relu_()
        return dense
    raise Skip("no such task")


def make_iree(task):
    import iree.compiler as compiler
    import iree.runtime as rt
    if TASKS[task].get("dtype") == "bf16":
        raise Skip("bf16 is not written for this peer here")
    if task in TRAINING:
        raise Skip("training is not written for IREE here")
    if task == "embedding":
        raise Skip("gathers are not written for IREE here")
    if task.startswith("sized_dense_") or task.startswith("decoder_block_"):
        raise Skip("sized programs (dynamic shapes) are not written for IREE here")
    if "model" in TASKS[task]:
        raise Skip("models are not imported into IREE here")
    rt.flags.parse_flags(f"--task_topology_max_group_count={THREADS}")
    vmfb = compiler.compile_str(mlir(task), target_backends=["llvm-cpu"],
                                extra_args=["--iree-llvmcpu-target-cpu=host"])
    config = rt.Config("local-task")
    context = rt.SystemContext(config=config)
    context.add_vm_module(rt.VmModule.copy_buffer(context.instance, vmfb))
    main = context.modules.module["main"]
    args = [rt.asdevicearray(config.device, a) for a in inputs(task)]
    return lambda: main(*args)  # synchronous: returns when the result is computed


def make_tinygrad(task):
    os.environ.setdefault("DEV", "CPU")  # tinygrad's CPU backend (C through clang), before import
    from tinygrad import Device, Tensor, TinyJit
    if TASKS[task].get("dtype") == "bf16":
        raise Skip("bf16 is not written for this peer here")
    if task in TRAINING:
        raise Skip("training is not written for tinygrad here")
    if task == "embedding":
        raise Skip("gathers are not written for tinygrad here")
    if task.startswith("sized_dense_") or task.startswith("decoder_block_"):
        raise Skip("sized programs are not written for tinygrad here")
    if "model" in TASKS[task]:
        raise Skip("models are not imported into tinygrad here")
    ins = [Tensor(a).realize() for a in inputs(task)]
    body = {
        "matmul512": lambda a, b: a @ b,
        "matmul1024": lambda a, b: a @ b,
        "softmax": lambda x: x.softmax(axis=1),
        "rowsum": lambda x: x.sum(axis=1),
        "relu_fma": lambda a, b, c: (a * b + c).relu(),
        "tiny_add": lambda a, b: a + b,
    }[task]
    jit = TinyJit(lambda *xs: body(*xs).realize())

    def run():
        jit(*ins)
        Device[Device.DEFAULT].synchronize()
    return run


def make_onnxruntime(task):
    import onnxruntime as ort
    if TASKS[task].get("dtype") == "bf16":
        raise Skip("ONNX Runtime has no bf16 kernels on the CPU")
    if task in TRAINING:
        raise Skip("training is not written for ONNX Runtime here")
    if "model" in TASKS[task]:
        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(model_file(task), options, providers=["CPUExecutionProvider"])
        feeds = dict(zip([i.name for i in session.get_inputs()], inputs(task)))
        return lambda: session.run(None, feeds)
    m = onnx_model(task)
    if m is None:
        raise Skip("not written as an ONNX model here")
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    # Inputs bound once and the output preallocated, as the other peers write into theirs.
    names = [i.name for i in session.get_inputs()]
    ins = inputs(task)
    binding = session.io_binding()
    for name, a in zip(names, ins):
        binding.bind_cpu_input(name, a)
    out = np.empty_like(session.run(None, dict(zip(names, ins)))[0])
    binding.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_numpy(out))
    return lambda: session.run_with_iobinding(binding)


def version():
    try:
        if PEER == "torch":
            import torch
            return f"PyTorch {torch.__version__}"
        if PEER == "iree":
            from importlib.metadata import version as v
            return f"IREE {v('iree-base-runtime')} (llvm-cpu)"
        if PEER == "tinygrad":
            from importlib.metadata import version as v
            return f"tinygrad {v('tinygrad')} (CPU)"
        if PEER == "onnxruntime":
            import onnxruntime
            return f"ONNX Runtime {onnxruntime.__version__} (CPU)"
        return f"NumPy {np.__version__}"
    except Exception as e:  # reported in the table's header instead of a version
        return f"{PEER}: not available ({type(e).__name__}: {e})"[:200]


MAKERS = {"numpy": make_numpy, "torch": make_torch, "iree": make_iree, "tinygrad": make_tinygrad,
          "onnxruntime": make_onnxruntime}


def main():
    made = {}
    for line in sys.stdin:
        task, reps = line.split()
        if task == "version":
            print(json.dumps({"version": version()}), flush=True)
            continue
        try:
            if task not in made:
                made[task] = MAKERS[PEER](task)
            # A training task's function takes the epochs and answers itself (time and accuracy).
            warmup = MODEL_WARMUP if "model" in TASKS[task] else 1
            answer = made[task](int(reps)) if task in TRAINED_AFRESH else {"ms": timed(made[task], int(reps), warmup)}
        except Skip as e:
            answer = {"skip": str(e)}
        except Exception as e:  # a peer that cannot run a task is reported, not fatal
            answer = {"skip": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
