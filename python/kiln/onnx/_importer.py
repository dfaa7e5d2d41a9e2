"""ONNX model -> kiln program: loading and checking the model, folding what is known at import
(initializers, Constant nodes, shape arithmetic), and the operators of `_ops.py`, `_conv.py` and
`_movement.py` for the rest."""

import ctypes
import os

import numpy as np
import onnx
from onnx import numpy_helper

from ._dims import dimension, expression, times
from ._graph import KILN_TYPES, Graph, OnnxImportError, Value, kiln_type_of
from ._emit import ELEMENTWISE, indices, read, target
from ._conv import data_in_blocks
from ._ops import FIRST_OPERAND_OF, OPS

# The default domain's opsets the operators are written for; a model outside them is refused.
MIN_OPSET, MAX_OPSET = 7, 22

class Converter:
    def __init__(self, model, sizes, source_name):
        self.model, self.source_name = model, source_name
        self.graph = Graph()
        self.sizes = dict(sizes or {})
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
        self.values = {}  # ONNX name -> Value
        self.constants = 0  # params of the importer's own (folded BatchNormalization, pool counts)
        self.index_tables = {}  # (shape, bytes) -> the param holding that table of indices
        self.computed_tables = {}  # (extent with a size, pieces) -> the tensor computing that table
        self.outputs = {o.name for o in model.graph.output}
        self.readers = {}  # name -> [(op_type, input position)] of the nodes that read it
        self.reader_nodes = {}  # name -> the nodes that read it
        self.producers = {out: node for node in model.graph.node for out in node.output if out}
        for node in model.graph.node:
            for i, name in enumerate(node.input):
                self.readers.setdefault(name, []).append((node.op_type, i))
                if node not in self.reader_nodes.setdefault(name, []):
                    self.reader_nodes[name].append(node)
        self.absorbed = set()  # the first outputs of nodes an earlier node computes (absorb)
        self.blocked_data = data_in_blocks(model)  # convolutions over blocks of channels
        self.graph.unblock = self.unblock

    # --- what the operators call ---------------------------------------------------------------

    def unsupported(self, node, why):
        raise OnnxImportError(f"{self.source_name}: node '{node.name or node.output[0]}' ({node.op_type}, opset "
                              f"{self.opset}): {why}")

    def read_only_as(self, name, op_type, position):
        """Whether every reader of `name` is an `op_type` node taking it at `position` (and the
        graph does not output it)."""
        readers = self.readers.get(name, [])
        return bool(readers) and name not in self.outputs and all(r == (op_type, position) for r in readers)

    def only_reader(self, node, op_type):
        """The one node that reads `node`'s first output, if it is an `op_type` node that reads it
        as its first input only and whose other outputs nothing reads, and the graph does not
        output it; else None. An operator may then compute that node with its own (absorb)."""
        name = node.output[0]
        readers = self.reader_nodes.get(name, [])
        if len(readers) != 1 or name in self.outputs:
            return None
        reader = readers[0]
        if reader.op_type != op_type or list(reader.input).count(name) != 1 or reader.input[0] != name:
            return None
        return None if any(self.used(reader, i) for i in range(1, len(reader.output))) else reader

    def constant_value(self, name):
        """The value of `name` where it is known before any node runs: an initializer, a value
        already folded, or the output of a Constant node (which may come later in the graph than
        the node asking); else None."""
        value = self.values.get(name)
        if value is not None:
            return value.const
        producer = self.producers.get(name)
        if producer is None or producer.op_type != "Constant":
            return None
        return self.constant_attribute(producer, self.attributes(producer))

    def attributes(self, node):
        """The node's attributes by name, as Python values; a string as a str (ONNX stores bytes)."""
        values = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        return {name: v.decode("utf-8", "replace") if isinstance(v, bytes) else v for name, v in values.items()}

    def absorb(self, nodes):
        """Marks `nodes` computed: the operator that absorbed them wrote their first outputs."""
        self.absorbed.update(n.output[0] for n in nodes)

    def used(self, node, i):
        """Whether output `i` of `node` is read by another node or is an output of the graph."""
        return len(node.output) > i and (node.output[i] in self.readers or node.output[i] in self.outputs)

    def kiln_type(self, node, onnx_type):
        if onnx_type not in KILN_TYPES:
            name = onnx.TensorProto.DataType.Name(onnx_type) if onnx_type in onnx.TensorProto.DataType.values() \
                else str(onnx_type)
            self.unsupported(node, f"element type {name}, which kiln has not")
        return KILN_TYPES[onnx_type]

    def known(self, node, value, what, symbolic=False):
        """The value of an input that must be known at import (a shape, axes, pads)."""
        if value is None or value.const is None:
            self.unsupported(node, f"its input '{what}' is computed by the model; kiln needs it known at import")
        if value.const.dtype == object and not symbolic:
            self.unsupported(node, f"its input '{what}' depends on a dimension that is a size")
        return value.const

    def constant(self, array, hint):
        """A param holding `array`, which the importer computed (folded BatchNormalization)."""
        self.constants += 1
        value = Value(f"kiln_{hint}_{self.constants}", kiln_type_of(array), array.shape, array)
        self.graph.declare("param", value)
        return value

    def index_table(self, array):
        """A param holding the i32 `array`, shared with every other table of the same values."""
        key = (array.shape, array.tobytes())
        if key not in self.index_tables:
            self.index_tables[key] = self.constant(array, "reshape_index")
        return self.index_tables[key]

    def output(self, node, i, dtype, shape, product_shape=None):
        """Output `i` of `node`: a tensor, or an output where the graph outputs it; declared with
        `shape` where its ONNX shape, `product_shape`, has a product of sizes (Value)."""
        name = node.output[i]
        for d in shape:
            if isinstance(d, str) and dimension(d) is None:
                self.unsupported(node, f"its output would have the dimension {d}, a product of sizes, which kiln "
                                       "declares only where a Reshape makes it (as the sizes, one dimension each)")
        if product_shape is not None and name in self.outputs:
            self.unsupported(node, f"its output '{name}' is {list(product_shape)}, with a dimension that is a product "
                                   "of sizes, which kiln declares only as a tensor that a Reshape splits again")
        value = Value(name, dtype, shape)
        value.product_shape = product_shape
        self.graph.declare("output" if name in self.outputs else "tensor", value)
        self.values[name] = value
        return value

    def blocked_output(self, node, i, dtype, shape):
        """Output `i` of `node` ([N, C, H, W]) as a convolution over blocks writes it: held in a
        tensor of blocks of 16 channels (Value.blocked), declared itself only where read so."""
        value = Value(node.output[i], dtype, shape)
        value.blocked = self._blocks(dtype, shape)
        self.values[node.output[i]] = value
        return value

    def _blocks(self, dtype, shape):
        """A new tensor for [N, C, H, W] in blocks of 16 channels: [N, ceil(C/16), H, W, 16]."""
        n, c, h, w = shape
        return self.graph.temporary(dtype, (n, -(-c // 16), h, w, 16), "blocks")

    def blocked(self, value):
        """`value` [N, C, H, W] in blocks of 16 channels: its Value.blocked, written here the first
        time (x[n, 16·cb + l, h, w]; the lanes past C read 0)."""
        if value.blocked is None:
            blocks = self._blocks(value.dtype, value.shape)
            self.emit(f"{target(self, blocks, indices(5))} = {read(self, value, ['i0', '16*i1 + i4', 'i2', 'i3'])}")
            value.blocked = blocks
        return value.blocked

    def unblock(self, value):
        """Declares `value`, held only in blocks (Value.blocked), and computes it from them:
        y[n, c, h, w] = blocks[n, c / 16, h, w, c % 16], the divisions read from index tables."""
        channels = np.arange(value.shape[1], dtype=np.int32)
        block, lane = self.index_table(channels // 16), self.index_table(channels % 16)
        self.graph.declare("output" if value.name in self.outputs else "tensor", value)
        self.emit(f"{target(self, value, indices(4))} = {value.blocked.kname}[i0, {self.graph.ref(block)}[i1], i2, i3, "
                  f"{self.graph.ref(lane)}[i1]]")

    def emit(self, text):
        self.graph.emit(text)

    # --- the graph -------------------------------------------------------------------------------

    def run(self):
        if self.opset is None or not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise OnnxImportError(f"{self.source_name}: opset {self.opset} of the default domain; kiln imports "
                                  f"opsets {MIN_OPSET} to {MAX_OPSET}")
        graph = self.model.graph
        for init in graph.initializer:
            try:
                array = numpy_helper.to_array(init)
            except Exception as e:  # data shorter than the shape, an unknown type
                raise OnnxImportError(f"{self.source_name}: initializer '{init.name}' cannot be read: {e}") from None
            self.values[init.name] = Value(init.name, kiln_type_of(array), array.shape, array)
        for inp in graph.input:
            if inp.name in self.values:
                continue  # an initializer listed as an input too (IR version < 4)
            self.values[inp.name] = self.graph_input(inp)
        for node in graph.node:
            self.convert(node)
        for out in graph.output:
            value = self.values.get(out.name)
            if value is None:
                raise OnnxImportError(f"{self.source_name}: output '{out.name}' is computed by no node")
            if value.blocked is not None and value.kname is None:
                self.graph.ref(value)  # computed from its blocks, into an output of its own name
            if value.kname is None or self.graph.declared.get(value.kname, (None,))[0] != "output":
                value = self.copy_to_output(value)
            self.graph.outputs[out.name] = value.kname
        return self.graph

    def graph_input(self, inp):
        kind = inp.type.WhichOneof("value")
        if kind != "tensor_type":
            raise OnnxImportError(f"{self.source_name}: input '{inp.name}' is a {kind}; kiln imports tensors")
        t = inp.type.tensor_type
        if t.elem_type not in KILN_TYPES:
            raise OnnxImportError(f"{self.source_name}: input '{inp.name}' has element type "
                                  f"{onnx.TensorProto.DataType.Name(t.elem_type)}, which kiln has not")
        if not t.HasField("shape"):
            raise OnnxImportError(f"{self.source_name}: input '{inp.name}' has no shape")
        shape = []
        for d, dim in enumerate(t.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                shape.append(dim.dim_value)
            elif dim.HasField("dim_param") and dim.dim_param:
                shape.append(self.size(dim.dim_param))
            else:
                raise OnnxImportError(f"{self.source_name}: dimension {d} of input '{inp.name}' has neither an "
                                      "extent nor a name; name it in the model or pass sizes=")
        value = Value(inp.name, KILN_TYPES[t.elem_type], shape)
        self.graph.declare("input", value)
        return value

    def size(self, dim_param):
        """A named dimension: the number `sizes` gives it, else a kiln size of that name."""
        if dim_param in self.sizes:
            return int(self.sizes[dim_param])
        name = self.graph.kiln_name(dim_param)
        if name not in self.graph.sizes:
            self.graph.sizes.append(name)
        return name

    def copy_to_output(self, value):
        """An output the graph passes through (an input, a constant, another output): a copy
        into an output of its own, which `Graph.outputs` names."""
        out = Value(value.name + "__out", value.dtype, value.shape)
        self.graph.declare("output", out)
        subs = indices(value.rank)
        self.emit(f"{target(self, out, subs)} = {read(self, value, subs)}")
        return out

    def inputs_of(self, node):
        ins = []
        for name in node.input:
            if not name:
                ins.append(None)
            elif name not in self.values:
                raise OnnxImportError(f"{self.source_name}: node '{node.name or node.output[0]}' ({node.op_type}) "
                                      f"reads '{name}', which no node before it computes")
            else:
                ins.append(self.values[name])
        return ins

    def convert(self, node):
        if node.output and node.output[0] in self.absorbed:
            return
        if node.domain not in ("", "ai.onnx"):
            self.unsupported(node, f"domain '{node.domain}'; kiln imports the default domain")
        if node.output and all(o in self.values for o in node.output if o):
            return  # folded already, for a node before it (known_value)
        ins = self.inputs_of(node)
        attrs = self.attributes(node)
        folded = self.fold(node, ins, attrs)
        if folded is not None:
            self.store_folded(node, folded)
            return
        handler = OPS.get(node.op_type)
        if handler is None:
            self.unsupported(node, "this operator is not supported (docs/onnx.md lists those that are)")
        for i, v in enumerate(ins):
            if v is not None and v.transposed is not None and not (node.op_type == "MatMul" and i == 1):
                raise AssertionError(f"'{v.name}' is stored transposed for a MatMul, and {node.op_type} reads it")
            if v is not None and v.view is not None and not (node.op_type == "Gemm" and i == 0):
                self.unsupported(node, f"it reads '{v.name}', a flattening of the computed tensor '{v.view[0].name}' "
                                       "that kiln imports only as the first operand of a Gemm")
            if v is not None and v.product_shape is not None and node.op_type not in ELEMENTWISE and \
                    not (node.op_type in FIRST_OPERAND_OF and i == 0):
                self.unsupported(node, f"it reads '{v.name}', of shape {list(v.product_shape)}, whose dimension that "
                                       "is a product of sizes kiln imports only in elementwise operators and as the "
                                       "first operand of a Gemm, MatMul or Reshape; give one of the sizes a value "
                                       "(sizes= in Python, --size on the command line)")
        handler(self, node, ins, attrs)

    # --- folding ---------------------------------------------------------------------------------

    def store_folded(self, node, folded):
        for name, array in zip(node.output, folded):
            if name:
                self.values[name] = Value(name, kiln_type_of(array) if array.dtype != object else "i64",
                                          array.shape, array)

    def known_value(self, name):
        """The known Value of `name`, folding now the nodes that compute it from known values
        where a later node does (a scale that an Unsqueeze after the reader shapes); None where
        it is computed at run time or not yet converted."""
        value = self.values.get(name)
        if value is not None or name not in self.producers:
            return value if value is not None and value.const is not None else None
        node = self.producers[name]
        ins = [self.known_value(i) if i else None for i in node.input]
        if any(i and v is None for i, v in zip(node.input, ins)):
            return None
        folded = self.fold(node, ins, self.attributes(node))
        if folded is None:
            return None
        self.store_folded(node, folded)
        return self.values.get(name)

    def fold(self, node, ins, attrs):
        """The node's outputs where the importer can compute them now, else None."""
        op = node.op_type
        if op == "Constant":
            return [self.constant_attribute(node, attrs)]
        if op in ("Shape", "Size") and ins[0] is not None:
            shape = list(ins[0].onnx_shape)
            if op == "Size":
                total = 1
                for d in shape:
                    if not isinstance(d, int):
                        return None
                    total *= d
                return [np.array(total, np.int64)]
            start, end = attrs.get("start", 0), attrs.get("end", len(shape))
            dims = shape[start:end] if end is not None else shape[start:]
            if all(isinstance(d, int) for d in dims):
                return [np.array(dims, np.int64)]
            return [np.array(dims, dtype=object)]
        present = [v for v in ins if v is not None]
        if not present or any(v.const is None for v in present):
            return None
        if op == "ConstantOfShape" and ins[0].const.dtype != object:
            # Directly: the reference implementation takes seconds for a model's worth of weights.
            fill = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
            return [np.full(tuple(int(d) for d in ins[0].const), fill.reshape(-1)[0], dtype=fill.dtype)]
        if any(v.const.dtype == object for v in present):
            if all(isinstance(e, (int, np.integer)) for v in present if v.const.dtype == object for e in v.const.flat):
                # Shape arithmetic whose sizes were all given numbers: plain integers again.
                ins = [v if v is None or v.const.dtype != object else
                       Value(v.name, "i64", v.shape, v.const.astype(np.int64)) for v in ins]
                return self.fold_numpy(node, ins, attrs) or self.fold_reference(node, ins)
            return self.fold_symbolic(node, ins, attrs)
        return self.fold_numpy(node, ins, attrs) or self.fold_reference(node, ins)

    def constant_attribute(self, node, attrs):
        for key in ("value", "value_float", "value_int", "value_floats", "value_ints"):
            if key in attrs:
                v = attrs[key]
                if key == "value":
                    return numpy_helper.to_array(v)
                return np.array(v, np.float32 if "float" in key else np.int64)
        self.unsupported(node, f"a Constant with {sorted(attrs)}")

    def fold_numpy(self, node, ins, attrs):
        """The shape arithmetic and weight copies exported models are full of, computed in NumPy
        as the reference implementation computes them; None for anything else, which
        fold_reference runs (loading it costs about 12 MiB, and it builds a model per node)."""
        op, present = node.op_type, [v.const for v in ins if v is not None]
        x = present[0]
        if op == "Identity":
            return [x]
        if op == "Unsqueeze" and (self.opset < 13 or len(present) == 2):
            return [np.expand_dims(x, tuple(int(a) for a in (attrs["axes"] if self.opset < 13 else present[1])))]
        if op == "Squeeze":
            axes = attrs.get("axes") if self.opset < 13 else (present[1] if len(present) == 2 else None)
            return [np.squeeze(x, axis=None if axes is None else tuple(int(a) for a in axes))]
        if op == "Concat" and all(v.dtype == x.dtype for v in present):
            return [np.concatenate(present, axis=attrs["axis"])]
        if op == "Gather" and len(present) == 2 and present[1].dtype.kind == "i":
            axis = attrs.get("axis", 0)
            extent = x.shape[axis] if -x.ndim <= axis < x.ndim else 0
            if present[1].size and not (-extent <= present[1].min() and present[1].max() < extent):
                return None  # the reference implementation says what is out of range
            return [np.take(x, present[1].astype(np.int64), axis=axis)]
        if op == "Cast":
            to = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(attrs["to"]))
            if x.dtype.kind in "biu" and to.kind in "biuf" or x.dtype.kind == "f" and to.kind == "f":
                return [x.astype(to)]
            return None
        if op in ("Add", "Sub", "Mul", "Div") and len(present) == 2 and present[1].dtype == x.dtype \
                and x.dtype.kind in "iuf":
            y = present[1]
            if op != "Div" or x.dtype.kind == "f":
                fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
                with np.errstate(all="ignore"):
                    return [np.asarray(fn(x, y), dtype=x.dtype)]
            if not y.all():
                return None
            with np.errstate(all="ignore"):  # MIN / -1 wraps, as the reference's NumPy does
                q = np.floor_divide(x, y)  # toward zero, as ONNX's integer Div
                return [np.asarray(q + ((np.remainder(x, y) != 0) & ((x < 0) ^ (y < 0))), dtype=x.dtype)]
        return None

    def fold_reference(self, node, ins):
        """Runs the node in onnx's reference implementation over the known inputs."""
        from onnx.reference import ReferenceEvaluator
        names = [f"in{i}" if v is not None else "" for i, v in enumerate(ins)]
        inputs = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(v.const.dtype),
                                                     v.const.shape) for n, v in zip(names, ins) if v is not None]
        outs = [f"out{i}" if name else "" for i, name in enumerate(node.output)]
        single = onnx.helper.make_node(node.op_type, names, outs, domain=node.domain)
        single.attribute.extend(node.attribute)
        graph = onnx.helper.make_graph([single], "fold", inputs,
                                       [onnx.helper.make_empty_tensor_value_info(o) for o in outs if o])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", self.opset)])
        try:
            results = ReferenceEvaluator(model).run(None, {n: v.const for n, v in zip(names, ins) if v is not None})
        except Exception as e:
            if node.op_type in OPS:
                return None  # left to the operator's statement, which says what is wrong if anything
            self.unsupported(node, f"folding it failed: {e}")
        results = iter(results)
        return [np.asarray(next(results)) if o else None for o in outs]

    def fold_symbolic(self, node, ins, attrs):
        """Shape arithmetic over dimensions that are sizes: arrays of ints and size names."""
        op = node.op_type
        x = ins[0].const
        if op == "Cast":
            return [x]
        if op == "Concat":
            return [np.concatenate([v.const.astype(object) for v in ins if v is not None], axis=attrs["axis"])]
        if op in ("Identity", "Gather", "Unsqueeze", "Squeeze"):  # they move elements, of any type
            folded = self.fold_numpy(node, ins, attrs)
            if folded is not None:
                return [np.asarray(f, dtype=object) for f in folded]  # np.take of one index: the element
        if op == "Mul" and len(ins) == 2 and ins[1] is not None and ins[1].const is not None:
            a, b = np.broadcast_arrays(x.astype(object), ins[1].const.astype(object))
            product = np.empty(a.shape, dtype=object)
            for at in np.ndindex(a.shape):
                coef, sizes = times(a[at], b[at])
                if coef < 1 and sizes:
                    self.unsupported(node, f"a dimension {a[at]} * {b[at]} that is not a positive multiple of sizes")
                product[at] = expression((coef, sizes))  # a product of sizes too ("seq*batch"): Reshape declares it
            return [product]
        if op == "Range" or (op == "Slice" and x.dtype != object):
            return None  # a tensor whose extent is a size (Range's, a slice's): the operator writes it
        if op == "Slice" and self.opset >= 10:
            starts, ends = ins[1].const, ins[2].const
            if x.ndim == 1 and len(starts) == 1 and (len(ins) < 4 or ins[3] is None or int(ins[3].const[0]) == 0):
                step = int(ins[4].const[0]) if len(ins) > 4 and ins[4] is not None else 1
                return [x[slice(int(starts[0]), int(ends[0]), step)]]
        self.unsupported(node, "shape arithmetic on a dimension that is a size (only Shape, Gather, Concat, "
                               "Unsqueeze, Squeeze, Slice, Cast and Mul by numbers of shapes are folded with sizes, "
                               "and a Range from 0 in steps of 1 is computed)")


def load(model):
    """A ModelProto from a path, bytes or a ModelProto, checked; OnnxImportError when it is none."""
    if isinstance(model, onnx.ModelProto):
        source = model.graph.name or "model"
    else:
        source = os.path.basename(str(model)) if isinstance(model, (str, os.PathLike)) else "model"
        try:
            model = onnx.load_model_from_string(model) if isinstance(model, bytes) else onnx.load(model)
        except FileNotFoundError:
            raise
        except Exception as e:
            raise OnnxImportError(f"{source}: not an ONNX model ({type(e).__name__}: {e})") from None
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise OnnxImportError(f"{source}: the model is not valid ONNX: {str(e).splitlines()[0]}") from None
    return model, source


def import_model(model, sizes=None):
    """The model as a kiln.Program (docs/onnx.md): its inputs, outputs and initializers keep
    their names where they are kiln identifiers (`program.onnx_names` maps each ONNX name to
    kiln's), initializers are params whose values come with the program, and named dimensions
    become sizes unless `sizes` gives them a number. OnnxImportError names what it cannot do."""
    program, _ = import_text(model, sizes)
    return program


def import_text(model, sizes=None):
    """import_model, also returning the program's text."""
    model, source = load(model)
    graph = Converter(model, sizes, source).run()
    made = graph.make_program(os.path.splitext(source)[0])
    del graph
    _return_freed_memory()
    return made


def _return_freed_memory():
    """Gives the C library's freed heap back to the system. Folding a model's weights frees tens
    of MiB of temporaries (a convolution's weights times its normalization's scale, in f64), which
    glibc keeps in the process's heap, fragmented, so that the run's first allocations grew the
    heap past them: Inception v2's peak was 185 MiB with them kept, 160 without. Nothing on a C
    library without malloc_trim."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
