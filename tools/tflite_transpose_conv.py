#!/usr/bin/env python3
"""MediaPipe's custom Convolution2DTransposeBias op rewritten as TFLite's builtin TRANSPOSE_CONV.

    python3 tools/tflite_transpose_conv.py IN.tflite OUT.tflite

MediaPipe's selfie segmentation models end with one custom op, Convolution2DTransposeBias
(mediapipe/util/tflite/operations/transpose_conv_bias.cc): inputs x (NHWC, float32), weights [O,
kh, kw, I] and bias [O]; its custom options are the raw bytes of TfLiteTransposeConvParams
(int32 padding: 0 unknown, 1 SAME, 2 VALID; int32 stride_width; int32 stride_height). Its output
is [N, sh*(H-1) + kh - pad_h, sw*(W-1) + kw - pad_w, O], where only SAME has padding (the selfie
models say SAME, stride 2, with a 2x2 kernel: no padding, an exact 2x upsampling). OpenVINO's
TFLite frontend has no such op; it does read the builtin TRANSPOSE_CONV (BuiltinOperator 67,
options TransposeConvOptions, BuiltinOptions 49) whose inputs are (output_shape int32[4],
weights [O, kh, kw, I] (the same layout), x) and, from op version 3, an optional bias [O] as the
fourth input, which OpenVINO adds after the convolution. So each custom op becomes one
TRANSPOSE_CONV (version 3) with a new constant output_shape tensor (and its new buffer); the
weights, x, bias and output tensors stay as they were. `rewrite(data)` is the function;
tools/models.py calls it as the catalogue's "tflite-transpose-conv" transform.

How the file is rewritten. A flatbuffer's offsets (uoffset_t) only point forward, and all of
them are relative to where they are stored, so the whole old file can be moved as one block and
stay valid. The output is a new head followed by the old file unchanged (at a 16-byte aligned
place, so its buffers keep their alignment): the head holds a new Model table, new vectors for
operator_codes, subgraphs and buffers, a new SubGraph (new tensors and operators vectors) for
each subgraph with the op, the new Operator, OperatorCode, Tensor and Buffer tables. Every other
table, vector and string (old tensors, operators, buffers, names, metadata, signature defs) is
pointed at where it lies in the old block: only the tables the rewrite has to understand are
ever decoded, and nothing else is copied or re-encoded. The replaced custom ops and the old
root, tensor, operator and buffer vectors stay in the old block, unreferenced (the selfie models
grow by 3.3 kB, 1.3 %). Appending after the old file instead would need patching old offset
fields in place and could not build new vectors holding old tables (their offsets would point
backwards), and a full rebuild would have to know every table of the schema.

Field ids and enum values are those of TensorFlow's schema.fbs (tensorflow/compiler/mlir/lite/
schema/schema.fbs). The output is deterministic (the same input gives the same bytes). Models the
rewrite does not understand are refused with RewriteError: no such op, inputs other than float32
[N,H,W,I] / [O,kh,kw,I] / [O], an output shape that disagrees with the op's arithmetic, SAME
padding that actually pads, buffers stored outside the flatbuffer (models over 2 GB), or Model
or SubGraph fields newer than this schema. Standard library only (tools/models.py, which runs
before anything is installed, uses it).
"""
import hashlib
import struct
import sys

CUSTOM_CODE = "Convolution2DTransposeBias"

# schema.fbs: enum BuiltinOperator, union BuiltinOptions (NONE is 0), enums TensorType, Padding.
BUILTIN_CUSTOM = 32
BUILTIN_TRANSPOSE_CONV = 67
OPTIONS_TRANSPOSE_CONV = 49
TRANSPOSE_CONV_VERSION = 3  # the version that takes the optional fourth input, the bias
TENSOR_FLOAT32, TENSOR_INT32 = 0, 2
PADDING_SAME, PADDING_VALID = 0, 1
# TfLiteTransposeConvParams.padding (TfLitePadding in tensorflow/lite/core/c/builtin_op_data.h).
TFLITE_PADDING = {0: "unknown", 1: "SAME", 2: "VALID"}

# Field ids (the order of the fields in each table of schema.fbs; a union takes two ids).
MODEL_VERSION, MODEL_OPERATOR_CODES, MODEL_SUBGRAPHS, MODEL_DESCRIPTION, MODEL_BUFFERS, \
    MODEL_METADATA_BUFFER, MODEL_METADATA, MODEL_SIGNATURE_DEFS = range(8)
SUBGRAPH_TENSORS, SUBGRAPH_INPUTS, SUBGRAPH_OUTPUTS, SUBGRAPH_OPERATORS, SUBGRAPH_NAME = range(5)
OPCODE_DEPRECATED_BUILTIN_CODE, OPCODE_CUSTOM_CODE, OPCODE_VERSION, OPCODE_BUILTIN_CODE = range(4)
OP_OPCODE_INDEX, OP_INPUTS, OP_OUTPUTS, OP_BUILTIN_OPTIONS_TYPE, OP_BUILTIN_OPTIONS, OP_CUSTOM_OPTIONS = range(6)
OP_LARGE_CUSTOM_OPTIONS_OFFSET = 9
TENSOR_SHAPE, TENSOR_TYPE, TENSOR_BUFFER, TENSOR_NAME = range(4)
BUFFER_DATA, BUFFER_OFFSET = range(2)
TCONV_PADDING, TCONV_STRIDE_W, TCONV_STRIDE_H = range(3)

IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3


class RewriteError(ValueError):
    """A model this rewrite does not apply to or does not understand: the reason, for the user."""


# --- reading ---------------------------------------------------------------------------------

class Table:
    """One table of the flatbuffer in `data` at `pos`: its fields found through its vtable."""

    def __init__(self, data, pos, what):
        self.data, self.pos, self.what = data, pos, what
        vtable = pos - _unpack(data, "<i", pos, what)
        size = _unpack(data, "<H", vtable, what)
        if size < 4 or size % 2:
            raise RewriteError(f"{what}: a malformed vtable")
        self.slots = [_unpack(data, "<H", vtable + 4 + 2 * i, what) for i in range((size - 4) // 2)]

    def present(self):
        """The ids of the fields stored in this table."""
        return [i for i, s in enumerate(self.slots) if s]

    def _at(self, field):
        return self.pos + self.slots[field] if field < len(self.slots) and self.slots[field] else None

    def scalar(self, field, fmt, default=0):
        p = self._at(field)
        return default if p is None else _unpack(self.data, fmt, p, self.what)

    def target(self, field):
        """Where the field's offset points (a table, vector or string), or None when absent."""
        p = self._at(field)
        return None if p is None else p + _unpack(self.data, "<I", p, self.what)

    def _vector(self, field):
        p = self.target(field)
        if p is None:
            return None, 0
        n = _unpack(self.data, "<I", p, self.what)
        if p + 4 + n > len(self.data):
            raise RewriteError(f"{self.what}: a vector runs past the end of the file")
        return p + 4, n

    def ints(self, field):
        start, n = self._vector(field)
        if start is None:
            return []
        return list(_unpack_many(self.data, f"<{n}i", start, self.what))

    def raw(self, field):
        start, n = self._vector(field)
        return b"" if start is None else bytes(self.data[start:start + n])

    def string(self, field):
        try:
            return self.raw(field).decode("utf-8")
        except UnicodeDecodeError:
            raise RewriteError(f"{self.what}: a string that is not UTF-8")

    def tables(self, field, what):
        """The positions and tables of a vector of tables."""
        start, n = self._vector(field)
        if start is None:
            return []
        out = []
        for i in range(n):
            p = start + 4 * i
            pos = p + _unpack(self.data, "<I", p, self.what)
            out.append((pos, Table(self.data, pos, f"{what} {i}")))
        return out


def _unpack(data, fmt, pos, what):
    return _unpack_many(data, fmt, pos, what)[0]


def _unpack_many(data, fmt, pos, what):
    try:
        if pos < 0:
            raise struct.error("negative position")
        return struct.unpack_from(fmt, data, pos)
    except struct.error:
        raise RewriteError(f"{what}: an offset points outside the file (not a TFLite flatbuffer, or a damaged one)")


# --- writing ---------------------------------------------------------------------------------

class Builder:
    """Builds a flatbuffer from its end to its start, as flatbuffers' own builders do, with the
    old file already placed at the end. An object is named by its distance from the end of the
    output (a ref); an offset stored at ref F to an object at ref T is F - T, positive because
    children (and the old file) are placed before their parents (nearer the end). The output's
    length is made a multiple of 16 when finished, so alignment against the end is alignment
    in the file."""

    def __init__(self, tail):
        padded = bytes(tail) + bytes(-len(tail) % 16)
        self.chunks = [padded]  # in reverse order of the output
        self.size = len(padded)
        self.tail_size = len(padded)

    def old(self, pos):
        """The ref of the object at `pos` in the old file."""
        return self.tail_size - pos

    def _prepend(self, blob):
        self.chunks.append(blob)
        self.size += len(blob)
        return self.size

    def _align(self, following, alignment):
        """Pads so that `following` more bytes end up aligned to `alignment`."""
        pad = -(self.size + following) % alignment
        if pad:
            self._prepend(bytes(pad))

    def vector(self, fmt, values, alignment=4):
        """A vector of scalars (struct format letter `fmt`); its ref is that of its length."""
        body = struct.pack(f"<{len(values)}{fmt}", *values)
        self._align(len(body), max(alignment, 4, struct.calcsize(fmt)))
        self._prepend(body)
        return self._prepend(struct.pack("<I", len(values)))

    def bytes_vector(self, blob, alignment=16):
        self._align(len(blob), alignment)
        self._prepend(bytes(blob))
        return self._prepend(struct.pack("<I", len(blob)))

    def string(self, text):
        blob = text.encode("utf-8")
        self._align(len(blob) + 1, 4)
        self._prepend(blob + b"\0")
        return self._prepend(struct.pack("<I", len(blob)))

    def refs(self, refs):
        """A vector of offsets to tables (or strings): element i, at ref E, holds E - refs[i]."""
        self._align(4 * len(refs), 4)
        for r in reversed(refs):
            self._prepend(struct.pack("<I", self.size + 4 - r))
        return self._prepend(struct.pack("<I", len(refs)))

    def table(self, fields):
        """A table from {field id: (struct format, value)}; format "ref" is an offset to a ref.
        The vtable is put right before the table; fields are laid out widest first."""
        sizes = {f: 4 if fmt == "ref" else struct.calcsize(fmt) for f, (fmt, _) in fields.items()}
        where, end = {}, 4  # after the soffset to the vtable
        for f in sorted(fields, key=lambda f: (-sizes[f], f)):
            end += -end % sizes[f]
            where[f] = end
            end += sizes[f]
        alignment = max([4] + list(sizes.values()))
        end += -end % 4
        self._align(end, alignment)
        start = self.size + end  # the table's ref once prepended
        body = bytearray(end)
        slots = max(fields, default=-1) + 1
        vtable_size = 4 + 2 * slots
        struct.pack_into("<i", body, 0, vtable_size)  # the vtable sits right before the table
        for f, (fmt, value) in fields.items():
            if fmt == "ref":
                struct.pack_into("<I", body, where[f], start - where[f] - value)
            else:
                struct.pack_into("<" + fmt, body, where[f], value)
        vtable = struct.pack(f"<HH{slots}H", vtable_size, end, *[where.get(f, 0) for f in range(slots)])
        self._prepend(bytes(body))
        self._prepend(vtable + bytes(-len(vtable) % 2))
        return start

    def finish(self, root, identifier):
        self._align(8, 16)
        self._prepend(identifier)
        self._prepend(struct.pack("<I", self.size + 4 - root))
        return b"".join(reversed(self.chunks))


# --- the rewrite -----------------------------------------------------------------------------

def _builtin_code(opcode):
    # schema.fbs: the larger of the two fields is the operator (old files have only the first).
    return max(opcode.scalar(OPCODE_DEPRECATED_BUILTIN_CODE, "<b"), opcode.scalar(OPCODE_BUILTIN_CODE, "<i"))


def _tensor(tensors, index, what):
    if not 0 <= index < len(tensors):
        raise RewriteError(f"{what}: tensor index {index} out of range")
    t = tensors[index][1]
    return t.ints(TENSOR_SHAPE), t.scalar(TENSOR_TYPE, "<b"), t.string(TENSOR_NAME)


def _plan(op, tensors, what):
    """The TRANSPOSE_CONV for one custom op: (padding, stride_w, stride_h, output shape)."""
    inputs, outputs = op.ints(OP_INPUTS), op.ints(OP_OUTPUTS)
    if len(inputs) != 3 or len(outputs) != 1:
        raise RewriteError(f"{what}: {len(inputs)} inputs and {len(outputs)} outputs, expected 3 (x, weights, bias) and 1")
    (xs, xt, _), (ws, wt, _), (bs, bt, _), (ys, yt, yname) = (
        _tensor(tensors, i, what) for i in inputs + outputs)
    if (xt, wt, bt, yt) != (TENSOR_FLOAT32,) * 4:
        raise RewriteError(f"{what}: tensor types {(xt, wt, bt, yt)}, expected float32 (0) throughout")
    if len(xs) != 4 or len(ws) != 4 or len(bs) != 1 or len(ys) != 4:
        raise RewriteError(f"{what}: shapes x {xs}, weights {ws}, bias {bs}, output {ys}: expected ranks 4, 4, 1, 4")
    if ws[3] != xs[3] or bs[0] != ws[0] or min(xs + ws) < 1:
        raise RewriteError(f"{what}: shapes x {xs} (NHWC), weights {ws} (O,kh,kw,I), bias {bs} do not fit together")
    params = op.raw(OP_CUSTOM_OPTIONS)
    if len(params) < 12:
        raise RewriteError(f"{what}: {len(params)} bytes of custom options, expected TfLiteTransposeConvParams (12 or more)")
    padding, stride_w, stride_h = struct.unpack_from("<3i", params)
    if padding not in TFLITE_PADDING or stride_w < 1 or stride_h < 1:
        raise RewriteError(f"{what}: custom options padding {padding}, strides {stride_w}x{stride_h} are not TfLiteTransposeConvParams")
    kh, kw = ws[1], ws[2]
    pad_h = pad_w = 0
    if padding == 1:  # MediaPipe's op pads only for SAME, by this much (then half of it before)
        pad_h = max(0, kh - (xs[1] - 1) % stride_h - 1)
        pad_w = max(0, kw - (xs[2] - 1) % stride_w - 1)
    if pad_h or pad_w:
        raise RewriteError(f"{what}: SAME padding that pads ({pad_h}, {pad_w}) is not handled")
    shape = [xs[0], stride_h * (xs[1] - 1) + kh, stride_w * (xs[2] - 1) + kw, ws[0]]
    if ys != shape:
        raise RewriteError(f"{what}: output {yname!r} is {ys}, the op makes {shape}")
    # Without padding SAME and VALID give the same output; keep what the model said.
    return (PADDING_SAME if padding == 1 else PADDING_VALID), stride_w, stride_h, shape, yname


def rewrite(data):
    """The model with every Convolution2DTransposeBias replaced by TRANSPOSE_CONV (see the module doc)."""
    return rewrite_with_summary(data)[0]


def rewrite_with_summary(data):
    """rewrite's bytes, and (subgraph, operator, padding, stride_w, stride_h, output shape) per op."""
    data = bytes(data)
    if len(data) < 8 or data[4:8] != IDENTIFIER:
        raise RewriteError("not a TFLite model (no TFL3 file identifier)")
    model = Table(data, _unpack(data, "<I", 0, "the model"), "the model")
    unknown = [f for f in model.present() if f > MODEL_SIGNATURE_DEFS]
    if unknown:
        raise RewriteError(f"the model has fields {unknown}, newer than this rewrite knows")
    if model.scalar(MODEL_VERSION, "<I") != SCHEMA_VERSION:
        raise RewriteError(f"schema version {model.scalar(MODEL_VERSION, '<I')}, expected {SCHEMA_VERSION}")
    opcodes = model.tables(MODEL_OPERATOR_CODES, "operator code")
    custom = {i for i, (_, oc) in enumerate(opcodes)
              if _builtin_code(oc) == BUILTIN_CUSTOM and oc.string(OPCODE_CUSTOM_CODE) == CUSTOM_CODE}
    if not custom:
        raise RewriteError(f"the model has no {CUSTOM_CODE} op")
    buffers = model.tables(MODEL_BUFFERS, "buffer")
    if not buffers:
        raise RewriteError("the model has no buffers (not even the empty buffer 0)")
    if any(b.scalar(BUFFER_OFFSET, "<Q") > 1 for _, b in buffers):
        raise RewriteError("the model keeps buffers outside the flatbuffer (a model over 2 GB): not handled")

    b = Builder(data)
    new_opcode = len(opcodes)  # one new OperatorCode, after the old ones (indices stay)
    new_buffers = []  # refs of the new Buffer tables, after the old ones
    subgraph_refs = []
    rewritten = []
    for s, (spos, sg) in enumerate(model.tables(MODEL_SUBGRAPHS, "subgraph")):
        ops = sg.tables(SUBGRAPH_OPERATORS, f"subgraph {s} operator")
        if any(op.scalar(OP_LARGE_CUSTOM_OPTIONS_OFFSET, "<Q") > 1 for _, op in ops):
            raise RewriteError("the model keeps custom options outside the flatbuffer (a model over 2 GB): not handled")
        targets = [i for i, (_, op) in enumerate(ops) if op.scalar(OP_OPCODE_INDEX, "<I") in custom]
        if not targets:
            subgraph_refs.append(b.old(spos))
            continue
        unknown = [f for f in sg.present() if f > SUBGRAPH_NAME]
        if unknown:
            raise RewriteError(f"subgraph {s} has fields {unknown}, newer than this rewrite knows")
        tensors = sg.tables(SUBGRAPH_TENSORS, f"subgraph {s} tensor")
        new_tensors = []
        op_refs = [b.old(pos) for pos, _ in ops]
        for i in targets:
            op = ops[i][1]
            what = f"subgraph {s} operator {i} ({CUSTOM_CODE})"
            padding, stride_w, stride_h, shape, yname = _plan(op, tensors, what)
            buffer_index = len(buffers) + len(new_buffers)
            new_buffers.append(b.table({BUFFER_DATA: ("ref", b.bytes_vector(struct.pack("<4i", *shape)))}))
            shape_tensor = len(tensors) + len(new_tensors)
            new_tensors.append(b.table({
                TENSOR_SHAPE: ("ref", b.vector("i", [4])),
                TENSOR_TYPE: ("b", TENSOR_INT32),
                TENSOR_BUFFER: ("I", buffer_index),
                TENSOR_NAME: ("ref", b.string(f"{yname}/output_shape")),
            }))
            x, w, bias = op.ints(OP_INPUTS)
            op_refs[i] = b.table({
                OP_OPCODE_INDEX: ("I", new_opcode),
                OP_INPUTS: ("ref", b.vector("i", [shape_tensor, w, x, bias])),
                OP_OUTPUTS: ("ref", b.vector("i", op.ints(OP_OUTPUTS))),
                OP_BUILTIN_OPTIONS_TYPE: ("B", OPTIONS_TRANSPOSE_CONV),
                OP_BUILTIN_OPTIONS: ("ref", b.table({
                    TCONV_PADDING: ("b", padding), TCONV_STRIDE_W: ("i", stride_w), TCONV_STRIDE_H: ("i", stride_h)})),
            })
            rewritten.append((s, i, padding, stride_w, stride_h, shape))
        fields = {SUBGRAPH_TENSORS: ("ref", b.refs([b.old(pos) for pos, _ in tensors] + new_tensors)),
                  SUBGRAPH_OPERATORS: ("ref", b.refs(op_refs))}
        for f in (SUBGRAPH_INPUTS, SUBGRAPH_OUTPUTS, SUBGRAPH_NAME):
            if sg.target(f) is not None:
                fields[f] = ("ref", b.old(sg.target(f)))
        subgraph_refs.append(b.table(fields))
    if not rewritten:
        raise RewriteError(f"the model lists the {CUSTOM_CODE} op but no operator uses it (already rewritten?)")

    opcode = b.table({
        OPCODE_DEPRECATED_BUILTIN_CODE: ("b", BUILTIN_TRANSPOSE_CONV),
        OPCODE_VERSION: ("i", TRANSPOSE_CONV_VERSION),
        OPCODE_BUILTIN_CODE: ("i", BUILTIN_TRANSPOSE_CONV),
    })
    fields = {
        MODEL_VERSION: ("I", SCHEMA_VERSION),
        MODEL_OPERATOR_CODES: ("ref", b.refs([b.old(pos) for pos, _ in opcodes] + [opcode])),
        MODEL_SUBGRAPHS: ("ref", b.refs(subgraph_refs)),
        MODEL_BUFFERS: ("ref", b.refs([b.old(pos) for pos, _ in buffers] + new_buffers)),
    }
    for f in (MODEL_DESCRIPTION, MODEL_METADATA_BUFFER, MODEL_METADATA, MODEL_SIGNATURE_DEFS):
        if model.target(f) is not None:
            fields[f] = ("ref", b.old(model.target(f)))
    return b.finish(b.table(fields), IDENTIFIER), rewritten


def main(argv):
    if len(argv) != 2:
        print("usage: tflite_transpose_conv.py IN.tflite OUT.tflite", file=sys.stderr)
        return 2
    try:
        with open(argv[0], "rb") as f:
            data = f.read()
        out, rewritten = rewrite_with_summary(data)
        with open(argv[1], "wb") as f:
            f.write(out)
    except RewriteError as e:
        print(f"error: {argv[0]}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for s, i, padding, sw, sh, shape in rewritten:
        print(f"subgraph {s} operator {i}: {CUSTOM_CODE} -> TRANSPOSE_CONV v{TRANSPOSE_CONV_VERSION} "
              f"({'SAME' if padding == PADDING_SAME else 'VALID'}, stride {sw}x{sh}, output {shape}, bias as input 4)",
              file=sys.stderr)
    print(f"{argv[1]}: {len(out)} bytes, sha256 {hashlib.sha256(out).hexdigest()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
