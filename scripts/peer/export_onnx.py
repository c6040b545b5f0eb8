#!/usr/bin/python3
"""Exports models to the ONNX layout transformers.js loads, for the peer benchmarks: committed tiny models
(models/tiny/<name>, bench/peer.ts, peer.html) and any model folder given by path (the real-size ones of
bench/realsize.ts, .cache/realsize/<name>):

    OUT/<name>/config.json, generation_config.json, tokenizer*.json   copied from the model's folder
    OUT/<name>/onnx/model.onnx      the decoder with past_key_values.* in and present.* out, f32
    OUT/<name>/onnx/model.onnx_data[_i]   its weights, where they pass 2 GB (scripts/peer/onnx_external.py); the
                                    copied config.json then names the chunk count (transformers.js_config)
    OUT/<name>/model.safetensors    the same weights as f32, so that our engine can load them too (not with --no-f32-copy)
    OUT/<name>/peer-export.json     the sha256 of every input, to tell a stale export

Run: /usr/bin/python3 scripts/peer/export_onnx.py [--out .cache/peer] [--no-f32-copy] [name or folder ...]
(default: qwen3-tiny llama-tiny). Needs Debian's python3-torch (torch.onnx's TorchScript exporter; the onnx package
is not needed). Seconds at the tiny sizes; Qwen3-0.6B: see docs/performance.md (bench:realsize).

Before exporting, each model is checked twice: its logits on the golden ids against the float64 golden file
(test/golden/tiny-<name>.json, from scripts/golden/tiny_models.py), and a cached forward (a prefill, then one
token at a time) against the whole sequence. Either failing stops the export with the numbers.
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the imported golden scripts

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "golden"))
from onnx_decoder import CachedDecoder, UnsupportedPeerModel  # noqa: E402
from onnx_external import CHUNK, gather_external_data  # noqa: E402
from torch_decode import read_weights  # noqa: E402

DEFAULT_MODELS = ["qwen3-tiny", "llama-tiny"]
COPIED = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]
OPSET = 14
GOLDEN_TOL = 1e-4  # f32 forward against the f64 golden, relative to the largest logit
CACHE_TOL = 1e-5  # cached against whole, f32 both


class PeerExportCheckFailed(RuntimeError):
    pass


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def export_inputs(src):
    """The files an export depends on, with their hashes (bench/peer-export.ts compares the same list)."""
    files = [os.path.join(src, f) for f in ("config.json", "model.safetensors")]
    files += [os.path.join(HERE, f) for f in ("export_onnx.py", "onnx_decoder.py", "onnx_external.py")]
    return {os.path.relpath(f, ROOT): sha256(f) for f in files}


def golden_check(name, model):
    path = os.path.join(ROOT, "test", "golden", f"tiny-{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        g = json.load(fh)
    T, V = g["dims"]["T"], g["dims"]["vocab"]
    want = np.frombuffer(base64.b64decode(g["logits"]), dtype="<f8").reshape(T, V)
    ids = torch.tensor([g["ids"]])
    out = model(ids, torch.ones_like(ids), model.positions(0, T), *model.empty_cache())
    err = float(np.abs(out[0][0].double().numpy() - want).max() / np.abs(want).max())
    if not err < GOLDEN_TOL:
        raise PeerExportCheckFailed(
            f"{name}: logits are {err:.2e} (relative) off {path}, over {GOLDEN_TOL}; the exporter's decoder is wrong"
        )
    return err


def cache_check(name, model, vocab):
    ids = torch.randint(0, vocab, (1, 9), generator=torch.Generator().manual_seed(7))
    T = ids.shape[1]
    whole = model(ids, torch.ones_like(ids), model.positions(0, T), *model.empty_cache())[0][0, -1]
    P = 5
    out = model(ids[:, :P], torch.ones(1, P, dtype=torch.long), model.positions(0, P), *model.empty_cache())
    for t in range(P, T):
        out = model(ids[:, t:t + 1], torch.ones(1, t + 1, dtype=torch.long), model.positions(t, t + 1), *out[1:])
    err = float((out[0][0, -1] - whole).abs().max() / whole.abs().max())
    if not err < CACHE_TOL:
        raise PeerExportCheckFailed(f"{name}: cached decoding is {err:.2e} off the whole-sequence forward (over {CACHE_TOL})")
    return err


def write_safetensors(path, tensors):
    """A safetensors file of `tensors`: name -> (dtype as safetensors names it, shape, little-endian bytes), sorted by name."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def write_safetensors_f32(path, weights):
    arrays = {name: w.to(torch.float32).numpy().astype("<f4") for name, w in weights.items()}
    write_safetensors(path, {name: ("F32", a.shape, a.tobytes()) for name, a in arrays.items()})


def tiny_folder(arg):
    """The folder of a name under models/tiny (`qwen3-tiny`, `system/planner`), or None when there is none."""
    if os.path.isabs(arg):
        return None
    src = os.path.join(ROOT, "models", "tiny", arg)
    return src if os.path.isdir(src) else None


def source_folder(arg):
    """A name under models/tiny (which may hold a slash: system/planner), else a model folder's path."""
    src = tiny_folder(arg) or os.path.abspath(arg)
    if not os.path.isdir(src):
        raise FileNotFoundError(f"{src} does not exist; name a committed tiny model (npm run models:tiny makes them) or a model folder")
    return src


def export_one(arg, out_root, f32_copy=True, external_mib=None):
    src = source_folder(arg)
    name = arg if tiny_folder(arg) else os.path.basename(os.path.normpath(src))
    with open(os.path.join(src, "config.json")) as fh:
        cfg = json.load(fh)
    # f32 (bf16 and f16 widen exactly), read through a memory map: a real-size model is gigabytes
    weights = read_weights(os.path.join(src, "model.safetensors"))
    model = CachedDecoder(cfg, weights).eval()
    dst = os.path.join(out_root, name)
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "onnx"))
    with torch.no_grad():
        golden = golden_check(name, model)
        cached = cache_check(name, model, cfg["vocab_size"])
        # trace with a non-empty cache and T > 1, so that no length is specialised away
        B, T, P = 1, 3, 2
        ids = torch.tensor([[1, 2, 3]])
        past = [torch.zeros(B, model.Hkv, P, model.D) for _ in range(2 * model.L)]
        kv = [f"{kind}.{i}.{part}" for i in range(model.L) for part in ("key", "value") for kind in ("past_key_values",)]
        pres = [f"present.{i}.{part}" for i in range(model.L) for part in ("key", "value")]
        dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
               "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
               "position_ids": {0: "batch_size", 1: "sequence_length"},
               "logits": {0: "batch_size", 1: "sequence_length"}}
        dyn.update({n: {0: "batch_size", 2: "past_sequence_length"} for n in kv})
        dyn.update({n: {0: "batch_size", 2: "total_sequence_length"} for n in pres})
        torch.onnx.export(model, (ids, torch.ones(B, P + T, dtype=torch.long), model.positions(P, P + T), *past),
                          os.path.join(tmp, "onnx", "model.onnx"), input_names=["input_ids", "attention_mask", "position_ids", *kv],
                          output_names=["logits", *pres], dynamic_axes=dyn, opset_version=OPSET, do_constant_folding=True)
    del model
    forced = external_mib is not None
    chunk = int(external_mib * 2 ** 20) if forced else CHUNK
    chunks = gather_external_data(os.path.join(tmp, "onnx", "model.onnx"), chunk=chunk, everything=forced)
    for f in COPIED:
        if os.path.exists(os.path.join(src, f)):
            shutil.copyfile(os.path.join(src, f), os.path.join(tmp, f))
    if not os.path.exists(os.path.join(tmp, "generation_config.json")):
        # transformers.js asks for it; a page's dev server answers a missing file with its HTML
        gen = {k: cfg[k] for k in ("bos_token_id", "eos_token_id") if k in cfg}
        with open(os.path.join(tmp, "generation_config.json"), "w") as fh:
            json.dump(gen, fh, indent=2)
    if chunks:  # transformers.js reads the chunk count from the model's config (or from_pretrained's options)
        cfg_out = dict(cfg, **{"transformers.js_config": {"use_external_data_format": chunks}})
        with open(os.path.join(tmp, "config.json"), "w") as fh:
            json.dump(cfg_out, fh, indent=2)
    if f32_copy:
        write_safetensors_f32(os.path.join(tmp, "model.safetensors"), weights)
    manifest = {"model": os.path.relpath(src, ROOT), "opset": OPSET, "torch": torch.__version__, "dtype": "fp32",
                "external_data_chunks": chunks,
                "checks": {"golden_rel_err": golden, "cache_rel_err": cached}, "inputs": export_inputs(src)}
    with open(os.path.join(tmp, "peer-export.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)  # the manifest lands with the files, never before them
    size = sum(os.path.getsize(os.path.join(dst, "onnx", f)) for f in os.listdir(os.path.join(dst, "onnx")))
    golden_txt = "no golden file" if golden is None else f"golden {golden:.1e}"
    data = f" in {chunks} external data file(s)" if chunks else ""
    print(f"{dst}/onnx/model.onnx: {size} bytes{data}, opset {OPSET}; {golden_txt}, cache {cached:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".cache", "peer"))
    ap.add_argument("--no-f32-copy", action="store_true", help="skip the f32 model.safetensors (our engine reads the source)")
    ap.add_argument("--external-data-mib", type=float, metavar="MIB",
                    help="weights in external data files of at most MIB each, at any size (tests the real-size layout)")
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    args = ap.parse_args()
    for name in args.models:
        try:
            export_one(name, os.path.abspath(args.out), f32_copy=not args.no_f32_copy, external_mib=args.external_data_mib)
        except (UnsupportedPeerModel, PeerExportCheckFailed, FileNotFoundError) as e:
            sys.exit(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
