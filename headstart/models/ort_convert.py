"""ORT-format models back to ONNX, their weight dequantisation folded, then int8-MatMul quantised.

Moonshine's packaged `.ort` files (ORT flatbuffers, format version 6) keep each weight as an int8
initializer behind a Cast -> Mul(scale) -> Add chain that runs at every call: each decoder step
dequantises all its weights, and onnxruntime does not re-optimise an ORT-format model at load.
`convert_ort_model` reads the flatbuffer with the schema bindings onnxruntime ships
(onnxruntime/tools/ort_format_model/ort_flatbuffers_py), rebuilds the graph as an `onnx.ModelProto`,
evaluates every Cast/Mul/Add/Transpose whose inputs are all constants once (numpy float32, the same
IEEE operations onnxruntime would run; the If branches of the merged decoder too, where the tied
embedding was transposed at every step for the output projection), keeps the results as float32
initializers, and then quantises the MatMuls with
`onnxruntime.quantization.quantize_dynamic` (int8 weights, per tensor; activations
quantised at run time). The steps are deterministic: the same input and library versions give the
same bytes.

Used only by `headstart models prepare moonshine-base` (headstart/models/); nothing here runs at
import or at load time.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

# the ops folded when all their inputs are constants: the dequantisation chain, and a weight's transpose
_FOLDABLE = frozenset({"Cast", "Mul", "Add", "Transpose"})


class OrtConvertError(RuntimeError):
    """The ORT-format model holds something this converter does not rebuild (the message says what)."""


def _fbs():
    """The flatbuffer schema classes (importing onnxruntime.tools.ort_format_model puts them on sys.path)."""
    import onnxruntime.tools.ort_format_model  # noqa: F401
    from ort_flatbuffers_py import fbs

    return fbs


def read_ort_model(path: str | Path):
    """Rebuild an ORT-format model file as an ONNX model (weights as stored, nothing folded).

    Args:
        path: a `.ort` file (ORT flatbuffer, identifier "ORTM").

    Returns:
        onnx.ModelProto with the same nodes, initializers, graph inputs/outputs (with their types and
        shapes), opset imports, IR version and metadata.

    Raises:
        OrtConvertError: not an ORT-format file, or it holds fused nodes, sparse initializers or
            externally stored tensors.
    """
    from onnx import helper

    fbs = _fbs()
    from ort_flatbuffers_py.fbs.InferenceSession import InferenceSession

    data = Path(path).read_bytes()
    if len(data) < 8 or data[4:8] != b"ORTM":
        raise OrtConvertError(f"{path} is not an ORT-format model (no ORTM identifier)")
    model = InferenceSession.GetRootAsInferenceSession(data, 0).Model()
    if model is None or model.Graph() is None:
        raise OrtConvertError(f"{path} holds no model graph")
    graph = _read_graph(model.Graph(), "main_graph", fbs, top_level=True)
    used_domains = _used_domains(graph)
    opsets = []
    for i in range(model.OpsetImportLength()):
        op = model.OpsetImport(i)
        domain = (op.Domain() or b"").decode()
        if domain in used_domains or domain == "":
            opsets.append(helper.make_opsetid(domain, op.Version()))
    out = helper.make_model(graph, opset_imports=opsets, producer_name=_s(model.ProducerName()) or "")
    out.ir_version = model.IrVersion()
    out.producer_version = _s(model.ProducerVersion()) or ""
    out.domain = _s(model.Domain()) or ""
    out.model_version = model.ModelVersion()
    for i in range(model.MetadataPropsLength()):
        prop = model.MetadataProps(i)
        entry = out.metadata_props.add()
        entry.key, entry.value = _s(prop.Key()) or "", _s(prop.Value()) or ""
    return out


def _s(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def _used_domains(graph) -> set[str]:
    domains = set()
    for node in graph.node:
        domains.add(node.domain)
        for attr in node.attribute:
            if attr.HasField("g"):
                domains |= _used_domains(attr.g)
            for sub in attr.graphs:
                domains |= _used_domains(sub)
    return domains


def _read_graph(g, name: str, fbs, *, top_level: bool):
    from onnx import helper

    node_args = {}
    for i in range(g.NodeArgsLength()):
        arg = g.NodeArgs(i)
        node_args[arg.Name().decode()] = arg
    if g.SparseInitializersLength():
        raise OrtConvertError("sparse initializers are not supported")
    initializers = [_read_tensor(g.Initializers(i), fbs) for i in range(g.InitializersLength())]
    nodes = []
    for i in range(g.NodesLength()):
        node = g.Nodes(i)
        if node.Type() != fbs.NodeType.NodeType.Primitive:
            raise OrtConvertError(f"node {_s(node.Name())!r} is a fused node; only primitive nodes convert")
        attrs = [_read_attribute(node.Attributes(j), fbs) for j in range(node.AttributesLength())]
        nodes.append(
            helper.make_node(
                node.OpType().decode(),
                [node.Inputs(j).decode() for j in range(node.InputsLength())],
                [node.Outputs(j).decode() for j in range(node.OutputsLength())],
                name=_s(node.Name()) or "",
                domain=_s(node.Domain()) or "",
                doc_string=_s(node.DocString()) or None,
            )
        )
        nodes[-1].attribute.extend(attrs)
    inputs = [_value_info(g.Inputs(i).decode(), node_args, fbs) for i in range(g.InputsLength())]
    outputs = [_value_info(g.Outputs(i).decode(), node_args, fbs) for i in range(g.OutputsLength())]
    return helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)


def _value_info(name: str, node_args: dict, fbs):
    from onnx import helper

    arg = node_args.get(name)
    type_info = arg.Type() if arg is not None else None
    if type_info is None or type_info.ValueType() != fbs.TypeInfoValue.TypeInfoValue.tensor_type:
        return helper.make_empty_tensor_value_info(name)
    tensor_type = fbs.TensorTypeAndShape.TensorTypeAndShape()
    tensor_type.Init(type_info.Value().Bytes, type_info.Value().Pos)
    shape = tensor_type.Shape()
    dims: list[int | str | None] | None = None  # None: no shape; a None dim: unknown size
    if shape is not None:
        dims = []
        for d in range(shape.DimLength()):
            value = shape.Dim(d).Value()
            if value is None:
                dims.append(None)
            elif value.DimType() == fbs.DimensionValueType.DimensionValueType.VALUE:
                dims.append(int(value.DimValue()))
            elif value.DimType() == fbs.DimensionValueType.DimensionValueType.PARAM:
                dims.append(value.DimParam().decode())
            else:
                dims.append(None)
    return helper.make_tensor_value_info(name, tensor_type.ElemType(), dims)


def _read_tensor(t, fbs):
    """A flatbuffer Tensor as an onnx.TensorProto (the ORT and ONNX data type numbers are the same)."""
    import onnx

    out = onnx.TensorProto()
    out.name = _s(t.Name()) or ""
    dims = [int(d) for d in t.DimsAsNumpy()] if t.DimsLength() else []
    out.dims.extend(dims)
    out.data_type = t.DataType()
    count = int(np.prod(dims)) if dims else 1
    if t.DataType() == onnx.TensorProto.STRING:
        out.string_data.extend(t.StringData(i) for i in range(t.StringDataLength()))
    elif t.RawDataLength():
        out.raw_data = t.RawDataAsNumpy().tobytes()
    elif count:
        raise OrtConvertError(f"tensor {out.name!r} has {count} elements but no inline data")
    return out


def _read_attribute(a, fbs):
    from onnx import AttributeProto, helper

    kinds = fbs.AttributeType.AttributeType
    name = a.Name().decode()
    kind = a.Type()
    if kind == kinds.FLOAT:
        return helper.make_attribute(name, a.F(), attr_type=AttributeProto.FLOAT)
    if kind == kinds.INT:
        return helper.make_attribute(name, a.I(), attr_type=AttributeProto.INT)
    if kind == kinds.STRING:
        return helper.make_attribute(name, a.S() or b"", attr_type=AttributeProto.STRING)
    if kind == kinds.TENSOR:
        return helper.make_attribute(name, _read_tensor(a.T(), fbs), attr_type=AttributeProto.TENSOR)
    if kind == kinds.GRAPH:
        return helper.make_attribute(name, _read_graph(a.G(), name, fbs, top_level=False), attr_type=AttributeProto.GRAPH)
    if kind == kinds.FLOATS:
        return helper.make_attribute(name, [float(x) for x in a.FloatsAsNumpy()] if a.FloatsLength() else [],
                                     attr_type=AttributeProto.FLOATS)
    if kind == kinds.INTS:
        return helper.make_attribute(name, [int(x) for x in a.IntsAsNumpy()] if a.IntsLength() else [],
                                     attr_type=AttributeProto.INTS)
    if kind == kinds.STRINGS:
        return helper.make_attribute(name, [a.Strings(i) for i in range(a.StringsLength())],
                                     attr_type=AttributeProto.STRINGS)
    if kind == kinds.TENSORS:
        return helper.make_attribute(name, [_read_tensor(a.Tensors(i), fbs) for i in range(a.TensorsLength())],
                                     attr_type=AttributeProto.TENSORS)
    if kind == kinds.GRAPHS:
        return helper.make_attribute(
            name, [_read_graph(a.Graphs(i), name, fbs, top_level=False) for i in range(a.GraphsLength())],
            attr_type=AttributeProto.GRAPHS,
        )
    raise OrtConvertError(f"attribute {name!r} has an unsupported type {kind}")


def fold_dequantize_chains(model) -> int:
    """Evaluate, in place, the Cast/Mul/Add/Transpose nodes whose inputs are all main-graph
    initializers (or results folded before them), in the main graph and in its subgraphs (the If
    branches of a merged decoder read the main graph's weights), and keep their outputs as main-graph
    float32 initializers: Cast(int8) -> Mul(scale) -> Add becomes one tensor, and a tied embedding's
    per-call Transpose for the output projection becomes a constant that the quantiser sees. Initializers
    that nothing reads any more are removed.

    Returns:
        The number of nodes folded.

    Raises:
        OrtConvertError: two folded nodes of the same name disagree, or a fold changed a dtype.
    """
    from onnx import numpy_helper

    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    folded_outputs: dict[str, np.ndarray] = {}
    count = _fold_nodes(graph, consts, folded_outputs)
    used = _names_read(graph.node) | {o.name for o in graph.output}
    originals = [t for t in graph.initializer if t.name in used]
    new = [numpy_helper.from_array(np.ascontiguousarray(v), name) for name, v in folded_outputs.items() if name in used]
    del graph.initializer[:]
    graph.initializer.extend(originals + new)
    return count


def _fold_nodes(graph, consts: dict[str, np.ndarray], folded_outputs: dict[str, np.ndarray]) -> int:
    """Fold the foldable nodes of `graph` (stored in topological order), then of its subgraphs."""
    kept = []
    count = 0
    for node in graph.node:
        if node.op_type in _FOLDABLE and node.domain in ("", "ai.onnx") and node.input and all(
            name in consts for name in node.input
        ):
            value = _evaluate(node, [consts[name] for name in node.input])
            name = node.output[0]
            if name in folded_outputs and not np.array_equal(folded_outputs[name], value):
                raise OrtConvertError(f"two folded nodes named {name!r} disagree")
            consts[name] = folded_outputs[name] = value
            count += 1
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    for node in graph.node:
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                # names the subgraph defines itself shadow nothing of the outer scope here (ONNX is SSA)
                count += _fold_nodes(sub, consts, folded_outputs)
    return count


def _evaluate(node, args: list[np.ndarray]) -> np.ndarray:
    from onnx import helper

    if node.op_type == "Cast":
        to = next(a.i for a in node.attribute if a.name == "to")
        return args[0].astype(helper.tensor_dtype_to_np_dtype(to))
    if node.op_type == "Transpose":
        perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
        return np.ascontiguousarray(np.transpose(args[0], perm))
    value = np.multiply(args[0], args[1]) if node.op_type == "Mul" else np.add(args[0], args[1])
    if value.dtype != args[0].dtype:
        raise OrtConvertError(f"folding {node.name!r} changed the dtype to {value.dtype}")
    return value


def _names_read(nodes) -> set[str]:
    """Every value name the nodes read, including inside their subgraphs (outer-scope references)."""
    names: set[str] = set()
    for node in nodes:
        names.update(node.input)
        for attr in node.attribute:
            subgraphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
            for sub in subgraphs:
                names |= _names_read(sub.node)
                names.update(o.name for o in sub.output)
    return names


def convert_ort_model(ort_path: str | Path, onnx_path: str | Path) -> dict:
    """`.ort` -> float32-folded ONNX -> int8 dynamic-quantised ONNX at `onnx_path`.

    Args:
        ort_path: the ORT-format model.
        onnx_path: where the quantised ONNX model is written (one file, no external data).

    Returns:
        {"folded": nodes folded, "matmul_integer": MatMulInteger nodes in the result (subgraphs too)}.

    Raises:
        OrtConvertError: the model cannot be rebuilt (see `read_ort_model`) or nothing was quantised.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = read_ort_model(ort_path)
    folded = fold_dequantize_chains(model)
    onnx.checker.check_model(model)
    onnx_path = Path(onnx_path)
    with tempfile.TemporaryDirectory(dir=onnx_path.parent) as tmp:
        float_path = Path(tmp) / "float.onnx"
        onnx.save_model(model, float_path)
        root_level = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic warns about pre-processing on root
        try:
            quantize_dynamic(
                float_path,
                onnx_path,
                weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul"],
                extra_options={"EnableSubgraph": True, "MatMulConstBOnly": True},
            )
        finally:
            logging.getLogger().setLevel(root_level)
    quantized = onnx.load(onnx_path)
    count = _count_ops(quantized.graph, "MatMulInteger")
    if count == 0:
        raise OrtConvertError(f"{ort_path}: quantize_dynamic quantised no MatMul")
    return {"folded": folded, "matmul_integer": count}


def _count_ops(graph, op_type: str) -> int:
    count = 0
    for node in graph.node:
        count += node.op_type == op_type
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                count += _count_ops(sub, op_type)
    return count
