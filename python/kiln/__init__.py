"""kiln: compile array programs for a device and run them.

The one-call path::

    import kiln, numpy as np
    prog = kiln.Program.from_text(source)        # or kiln.Program.from_file(path)
    run = prog.compile(device="cpu")             # compiled and linked on one device
    out = run(x=np.ones((4, 10), np.float32))    # runs `main`; dict: output name -> ndarray
    out = run("step", x=...)                     # runs routine "step"
    run.set("w", w); run.get("w")                # a tensor's host value in and out (copies)
    t = run.tensor("y")                          # the tensor on the device: t.shape, t.dtype,
    np.from_dlpack(t)                            #   t.numpy(): zero-copy on host memory

Value tracing (docs/tracing.md): what each statement computed, for finding a NaN::

    with kiln.ValueTrace.start() as trace:
        run = prog.compile(device="cpu", trace=trace)
        run(x=...)
        trace.write("values.jsonl")              # then: kiln trace-values values.jsonl --first-nan

Collectives (allreduce, allgather, ... in a program) combine tensors across the processes that
mpirun started: kiln.world() says which rank this is (.rank, .size); a process started alone is
rank 0 of a world of one.

Custom calls written in Python: kiln.register_call("name", fn) before compiling a program with
`call name(x, factor=2) -> y`; fn(x, y, factor=2.0) gets NumPy arrays and writes y in place.

Multi-stream work uses the runtime directly: Backend, Stream, Tensors, Code, Context, Routine,
device_to_device, from_host, to_host (see examples/python/train_moons.py). A framework's own
kernels become code like kiln's: Backend.compile_kernels with KernelExport, KernelDispatch and
KernelBinding (docs/python.md, "Your own kernels").

Errors: kiln.ProgramError (a subclass of kiln.Error) for a program that does not parse or check,
with every diagnostic as FILE:LINE:COL: error: ...; ValueError naming the tensor and what it
expects for a wrong name, dtype or shape; kiln.Error with kiln's message for anything that fails
while compiling or running.
"""

from ._kiln import (
    Backend,
    Code,
    CompiledProgram,
    Context,
    Error,
    KernelBinding,
    KernelDispatch,
    KernelExport,
    Program,
    ProgramError,
    Routine,
    Semaphore,
    Stream,
    Tensor,
    Tensors,
    ValueTrace,
    World,
    built_with_mpi,
    device_to_device,
    devices,
    from_dlpack,
    from_host,
    register_call,
    to_host,
    version as _version,
    world,
)

__version__ = _version()

__all__ = [
    "Backend",
    "Code",
    "CompiledProgram",
    "Context",
    "Error",
    "KernelBinding",
    "KernelDispatch",
    "KernelExport",
    "Program",
    "ProgramError",
    "Routine",
    "Semaphore",
    "Stream",
    "Tensor",
    "Tensors",
    "ValueTrace",
    "World",
    "__version__",
    "built_with_mpi",
    "device_to_device",
    "devices",
    "from_dlpack",
    "from_host",
    "register_call",
    "to_host",
    "world",
]
