"""Gathers an ONNX model's external tensors into the files transformers.js loads, `model.onnx_data`,
`model.onnx_data_1`, …, each at most CHUNK bytes, and rewrites the model's locations and offsets to match.

torch.onnx writes a model over 2 GB with one file per initializer beside model.onnx (named after the tensor).
onnxruntime-node finds those by path, but a page hands ONNX Runtime Web its external data as named buffers, and
transformers.js names them `<model>.onnx_data[_i]` (its `use_external_data_format`: the number of chunks). The
rewrite walks the protobuf wire format itself (ModelProto.graph = 7, GraphProto.initializer = 5,
TensorProto.external_data = 13 of key = 1 / value = 2, data_location = 14, raw_data = 9), so the onnx package is
not needed. `everything=True` moves inline initializers out too: a tiny model then takes the real-size path (tests).
"""
import os

CHUNK = 1 << 30  # below the 2 GB an ArrayBuffer or a protobuf length may hold in some runtimes
ALIGN = 4096


def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _enc_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(buf):
    """(field number, wire type, raw bytes of the whole field, payload) for each field of a message."""
    i = 0
    while i < len(buf):
        start = i
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(buf, i)
            payload = None
        elif wire == 1:
            i += 8
            payload = None
        elif wire == 5:
            i += 4
            payload = None
        elif wire == 2:
            n, j = _varint(buf, i)
            payload = buf[j:j + n]
            i = j + n
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield field, wire, buf[start:i], payload


def _len_field(field, payload):
    return _enc_varint(field << 3 | 2) + _enc_varint(len(payload)) + payload


def _entries(tensor):
    out = {}
    for f, _, _, p in _fields(tensor):
        if f == 13:
            kv = {ff: pp.decode() for ff, _, _, pp in _fields(p) if ff in (1, 2)}
            out[kv.get(1, "")] = kv.get(2, "")
    return out


def gather_external_data(model_path, base="model.onnx_data", chunk=CHUNK, everything=False):
    """Rewrites model_path in place; returns the number of data files written (0: the model had no external data)."""
    folder = os.path.dirname(model_path)
    with open(model_path, "rb") as fh:
        model = fh.read()
    chunks, sizes = [], []
    used = set()

    def place(data):
        if not chunks or sizes[-1] + len(data) > chunk:
            chunks.append(open(os.path.join(folder, base if not chunks else f"{base}_{len(chunks)}"), "wb"))
            sizes.append(0)
        pad = -sizes[-1] % ALIGN
        chunks[-1].write(b"\0" * pad + data)
        offset = sizes[-1] + pad
        sizes[-1] = offset + len(data)
        return (base if len(chunks) == 1 else f"{base}_{len(chunks) - 1}"), offset

    def tensor(buf):
        e = _entries(buf)
        if "location" in e:
            src = os.path.join(folder, e["location"])
            with open(src, "rb") as fh:
                fh.seek(int(e.get("offset", 0)))
                data = fh.read(int(e["length"])) if "length" in e else fh.read()
            used.add(src)
            kept = b"".join(raw for f, _, raw, _ in _fields(buf) if f != 13)
        else:
            inline = [p for f, _, _, p in _fields(buf) if f == 9]
            if not everything or not inline:
                return buf
            data = inline[0]
            kept = b"".join(raw for f, _, raw, _ in _fields(buf) if f not in (9, 14)) + _enc_varint(14 << 3) + _enc_varint(1)
        loc, off = place(data)
        new = [("location", loc), ("offset", str(off)), ("length", str(len(data)))]
        return kept + b"".join(_len_field(13, _len_field(1, k.encode()) + _len_field(2, v.encode())) for k, v in new)

    def graph(buf):
        return b"".join(_len_field(5, tensor(p)) if f == 5 else raw for f, _, raw, p in _fields(buf))

    try:
        out = b"".join(_len_field(7, graph(p)) if f == 7 else raw for f, _, raw, p in _fields(model))
    finally:
        for c in chunks:
            c.close()
    if not chunks:
        return 0
    with open(model_path + ".tmp", "wb") as fh:
        fh.write(out)
    os.replace(model_path + ".tmp", model_path)
    for src in used:
        if os.path.basename(src) != base and not os.path.basename(src).startswith(base + "_"):
            os.remove(src)
    return len(chunks)
