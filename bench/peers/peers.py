#!/usr/bin/env python3
"""kiln against what a user would use instead, side by side in one run: PyTorch (CPU, eager),
NumPy, IREE (llvm-cpu, the same computation in linalg MLIR), tinygrad (CPU) and ONNX Runtime
(CPU, the same operators in an ONNX model), on the rows of
bench/peers/tasks.py. Contenders alternate within each round (the first of a round changes from
round to round); a row's figure is the median over rounds of each round's median; every peer is
given the same thread count, and starts after a pause of PAUSE_S, so that no contender runs beside
the threads another one left spinning (NumPy's OpenBLAS spins for 0.1 s after a product, libgomp's
workers in PyTorch for a while too: without the pause the training row measured kiln at 4.78 ms
an epoch instead of 0.76, and PyTorch and NumPy 5-40% slower). Prints a Markdown table: each contender's median and kiln's time
divided by the fastest peer's (below 1: kiln is faster); the digits row trains afresh each round
from the same initial weights in the same batch order and gives each contender's test accuracy
beside its median epoch time. Run by bench/peers/run.sh.

    peers.py --build BUILD --venv-python PY [--torch-python PY] [--rounds N] [--threads N] [--tasks a,b]
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import tempfile

import numpy as np

from tasks import DIGITS_EXAMPLE, MLP_POINTS, MODEL_WARMUP, ONNX_EXAMPLE, TASKS, kiln_program, task_inputs

PAUSE_S = 0.3  # before each contender runs: longer than the 0.1 s OpenBLAS spins after a call

HERE = os.path.dirname(os.path.abspath(__file__))


class Worker:
    """A peer's worker.py process: one request, one JSON answer."""

    def __init__(self, peer, python, threads):
        # OpenMP and OpenBLAS (PyTorch, NumPy), tinygrad's CPU backend; PyTorch and IREE are also
        # told in worker.py.
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads), NUM_CPU_THREADS=str(threads))
        self.peer = peer
        self.proc = subprocess.Popen([python, os.path.join(HERE, "worker.py"), peer, str(threads)], cwd=HERE,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, task, reps):
        try:
            self.proc.stdin.write(f"{task} {reps}\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            return json.loads(line) if line else {"skip": f"{self.peer} worker exited"}
        except (BrokenPipeError, json.JSONDecodeError) as e:
            return {"skip": f"{self.peer} worker: {e}"}

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


class Kiln:
    """kiln through its own tools: `kiln run --warmup 1 --repeat` (median per run, run + await), the
    training demo (`train_moons`, ms per epoch on 2 streams) and the digits example
    (`train_digits.py`, median ms per epoch on 2 streams and the test accuracy)."""

    def __init__(self, build, threads, generated=False):
        self.build, self.generated = build, generated
        self.env = dict(os.environ, KILN_CPU_THREADS=str(threads))
        self.dir = tempfile.mkdtemp(prefix="kiln-peers-")

    def imported(self, task):
        """The model row's ONNX file imported (`python -m kiln.onnx`) into a folder of its own,
        once, and the name of its input; None and why where it cannot be."""
        name, folder = TASKS[task]["model"], os.environ.get("KILN_PEERS_MODELS", "")
        path = os.path.join(folder, name + ".onnx")
        if not folder or not os.path.exists(path):
            return None, "the model was not exported (PyTorch and torchvision missing?)"
        out = os.path.join(self.dir, name)
        if not os.path.exists(out):
            # The encoder's attention needs its batch given a number (docs/onnx.md); the row's
            # sequence is given too, as ONNX Runtime's and PyTorch's runs know it.
            sizes = ["--size", f"batch={TASKS[task]['batch']}", "--size", "seq=128"] if name == "encoder" else []
            r = subprocess.run([os.path.join(self.build, "python-venv/bin/python"), "-m", "kiln.onnx", path, "-o", out]
                               + sizes, env=dict(self.env, PYTHONPATH=os.path.join(self.build, "python")),
                               capture_output=True, text=True)
            if r.returncode != 0:
                return None, f"import failed: {(r.stderr or r.stdout).strip()[-200:]}"
        with open(os.path.join(out, "model.kiln")) as f:
            return out, re.search(r"^input (\w+) :", f.read(), re.M).group(1)

    def ask(self, task, reps):
        if self.generated and (not task.startswith("matmul") or TASKS[task].get("dtype")):
            return {"skip": "same as kiln"}
        env = self.env
        if "model" in TASKS[task]:
            folder, input_name = self.imported(task)
            if folder is None:
                return {"skip": input_name}
            data = os.path.join(self.dir, f"{task}_input.npy")
            np.save(data, task_inputs(task)[0])
            cmd = [os.path.join(self.build, "kiln"), "run", os.path.join(folder, "model.kiln"), "--params",
                   os.path.join(folder, "params"), "--input", f"{input_name}={data}", "--warmup", str(MODEL_WARMUP),
                   "--repeat", str(reps)]
            pattern = r"median ([0-9.]+) ms"
        elif task == "mlp_epoch":
            cmd = [os.path.join(self.build, "examples/train_moons/train_moons"), "--epochs", str(reps), "--streams", "2",
                   "--points", str(MLP_POINTS)]
            pattern = r"([0-9.]+) ms per epoch"
        elif task == "digits":
            # The Python example with the build's package, as its README runs it.
            cmd = [os.path.join(self.build, "python-venv/bin/python"),
                   os.path.join(DIGITS_EXAMPLE, "train_digits.py"), "--epochs", str(reps), "--streams", "2"]
            env = dict(env, PYTHONPATH=os.path.join(self.build, "python"))
            pattern = r"median ([0-9.]+) ms per epoch"
        else:
            path = os.path.join(self.dir, f"{task}.kiln")
            with open(path, "w") as f:
                f.write(kiln_program(task))
            # One untimed run first, as the peers' workers warm up each task once.
            cmd = [os.path.join(self.build, "kiln"), "run", path, "--warmup", "1", "--repeat", str(reps)]
            if TASKS[task].get("int_inputs"):
                # Positions in range, as the peers get them: the inputs from .npy files.
                for name, values in zip(TASKS[task]["input_names"], task_inputs(task)):
                    np.save(os.path.join(self.dir, f"{task}_{name}.npy"), values)
                    cmd += ["--input", f"{name}={os.path.join(self.dir, f'{task}_{name}.npy')}"]
            for name, value in TASKS[task].get("sizes", {}).items():
                cmd += ["--size", f"{name}={value}"]
            if self.generated:
                cmd.append("--no-auto-calls")
            pattern = r"median ([0-9.]+) ms"
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        m = re.search(pattern, r.stdout)
        if r.returncode != 0 or not m:
            return {"skip": f"kiln failed: {(r.stderr or r.stdout).strip()[:200]}"}
        answer = {"ms": float(m.group(1))}
        accuracy = re.search(r"test accuracy ([0-9.]+)%", r.stdout)
        if accuracy:
            answer["accuracy"] = float(accuracy.group(1)) / 100
        return answer

    def close(self):
        pass


def version_of(contender):
    if isinstance(contender, Kiln):
        r = subprocess.run([os.path.join(contender.build, "kiln"), "--version"], capture_output=True, text=True)
        return r.stdout.strip() or "kiln"
    return contender.ask("version", 0).get("version", contender.peer)


def fmt(ms):
    if ms is None:
        return "—"
    return f"{ms * 1e3:.1f} µs" if ms < 1 else f"{ms:.2f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--venv-python", required=True)
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tasks", default=",".join(TASKS))
    args = ap.parse_args()
    tasks = args.tasks.split(",")

    if any("model" in TASKS[t] for t in tasks):
        # The model rows' ONNX files, exported once by the PyTorch interpreter for every contender
        # (the workers inherit the folder's name).
        models = sorted({TASKS[t]["model"] for t in tasks if "model" in TASKS[t]})
        folder = tempfile.mkdtemp(prefix="kiln-peers-models-")
        done = subprocess.run([args.torch_python, os.path.join(ONNX_EXAMPLE, "export_models.py"), folder, "--models",
                               ",".join(models)], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"exporting the models failed, their rows are skipped: {done.stderr.strip()[-300:]}", file=sys.stderr)
        os.environ["KILN_PEERS_MODELS"] = folder
    contenders = {
        "kiln": Kiln(args.build, args.threads),
        "kiln, generated loops": Kiln(args.build, args.threads, generated=True),
        "PyTorch": Worker("torch", args.torch_python, args.threads),
        "NumPy": Worker("numpy", args.venv_python, args.threads),
        "IREE": Worker("iree", args.venv_python, args.threads),
        "tinygrad": Worker("tinygrad", args.venv_python, args.threads),
        "ONNX Runtime": Worker("onnxruntime", args.venv_python, args.threads),
    }
    names = list(contenders)
    versions = {n: version_of(c) for n, c in contenders.items()}
    results = {t: {n: [] for n in names} for t in tasks}
    accuracies = {t: {n: [] for n in names} for t in tasks}  # the training rows that report one
    skipped = {}
    for r in range(args.rounds):
        for t in tasks:
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                if (t, n) in skipped:
                    continue
                time.sleep(PAUSE_S)
                answer = contenders[n].ask(t, TASKS[t]["reps"])
                if "ms" in answer:
                    results[t][n].append(answer["ms"])
                    if "accuracy" in answer:
                        accuracies[t][n].append(answer["accuracy"])
                else:
                    skipped[(t, n)] = answer.get("skip", "?")
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    for c in contenders.values():
        c.close()

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"{datetime.date.today()}, {cpu}, {os.cpu_count()} cores, {args.threads} threads per contender, "
          f"medians of {args.rounds} rounds")
    print("Contenders: " + "; ".join(versions[n] for n in names[1:] if n != "kiln, generated loops") +
          f"; {versions['kiln']}\n")
    print("| work | " + " | ".join(names) + " | kiln ÷ fastest peer |")
    print("| --- |" + " --- |" * (len(names) + 1))
    peers = [n for n in names if not n.startswith("kiln")]
    for t in tasks:
        med = {n: statistics.median(v) if v else None for n, v in results[t].items()}
        best = min((med[n] for n in peers if med[n] is not None), default=None)
        ratio = f"{med['kiln'] / best:.2f}×" if best and med["kiln"] else "—"
        # A training row's cell also gives the accuracy the contender reached.
        cells = [fmt(med[n]) + (f", {100 * statistics.median(a):.1f}%" if (a := accuracies[t][n]) else "")
                 for n in names]
        print(f"| {TASKS[t]['what']} | " + " | ".join(cells) + f" | {ratio} |")
    # One note per peer and reason, naming the rows (the model rows share theirs).
    reasons = {}
    for (t, n), why in skipped.items():
        if why != "same as kiln":
            reasons.setdefault((n, why), []).append(t)
    notes = sorted(f"{n} on {', '.join(sorted(ts))}: {why}" for (n, why), ts in reasons.items())
    notes.append("torch.compile: not in PyTorch 1.13 (Debian's build), so eager only")
    if notes:
        print("\nNot measured: " + "; ".join(notes))


if __name__ == "__main__":
    main()
