#!/usr/bin/python3
"""Exports committed tiny models (models/tiny/<name>) to the ONNX layout transformers.js loads, for the peer
benchmark (bench/peer.ts, peer.html):

    .cache/peer/<name>/config.json, generation_config.json, tokenizer*.json   copied from models/tiny/<name>
    .cache/peer/<name>/onnx/model.onnx      the decoder with past_key_values.* in and present.* out, f32
    .cache/peer/<name>/model.safetensors    the same weights as f32, so that our engine can load them too
    .cache/peer/<name>/peer-export.json     the sha256 of every input, to tell a stale export

Run: /usr/bin/python3 scripts/peer/export_onnx.py [--out .cache/peer] [name ...]   (default: qwen3-tiny llama-tiny)
Needs Debian's python3-torch (torch.onnx's TorchScript exporter; the onnx package is not needed). Seconds.

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
from tiny_models import read_safetensors  # noqa: E402

DEFAULT_MODELS = ["qwen3-tiny", "llama-tiny"]
COPIED = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]
OPSET = 14
GOLDEN_TOL = 1e-4  # f32 forward against the f64 golden, relative to the largest logit
CACHE_TOL = 1e-5  # cached against whole, f32 both


class PeerExportCheckFailed(RuntimeError):
    pass


def sha256(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def export_inputs(src):
    """The files an export depends on, with their hashes (bench/peer-export.ts compares the same list)."""
    files = [os.path.join(src, f) for f in ("config.json", "model.safetensors")]
    files += [os.path.join(HERE, f) for f in ("export_onnx.py", "onnx_decoder.py")]
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
    out = model(ids, torch.ones_like(ids), torch.arange(T)[None], *model.empty_cache())
    err = float(np.abs(out[0][0].double().numpy() - want).max() / np.abs(want).max())
    if not err < GOLDEN_TOL:
        raise PeerExportCheckFailed(
            f"{name}: logits are {err:.2e} (relative) off {path}, over {GOLDEN_TOL}; the exporter's decoder is wrong"
        )
    return err


def cache_check(name, model, vocab):
    ids = torch.randint(0, vocab, (1, 9), generator=torch.Generator().manual_seed(7))
    T = ids.shape[1]
    whole = model(ids, torch.ones_like(ids), torch.arange(T)[None], *model.empty_cache())[0][0, -1]
    P = 5
    out = model(ids[:, :P], torch.ones(1, P, dtype=torch.long), torch.arange(P)[None], *model.empty_cache())
    for t in range(P, T):
        out = model(ids[:, t:t + 1], torch.ones(1, t + 1, dtype=torch.long), torch.tensor([[t]]), *out[1:])
    err = float((out[0][0, -1] - whole).abs().max() / whole.abs().max())
    if not err < CACHE_TOL:
        raise PeerExportCheckFailed(f"{name}: cached decoding is {err:.2e} off the whole-sequence forward (over {CACHE_TOL})")
    return err


def write_safetensors_f32(path, weights):
    header, blobs, offset = {}, [], 0
    for name in sorted(weights):
        arr = weights[name].to(torch.float32).numpy().astype("<f4")
        raw = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def export_one(name, out_root):
    src = os.path.join(ROOT, "models", "tiny", name)
    if not os.path.isdir(src):
        raise FileNotFoundError(f"{src} does not exist; the peer export reads the committed tiny models (npm run models:tiny makes them)")
    with open(os.path.join(src, "config.json")) as fh:
        cfg = json.load(fh)
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
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
        torch.onnx.export(model, (ids, torch.ones(B, P + T, dtype=torch.long), torch.arange(P, P + T)[None], *past),
                          os.path.join(tmp, "onnx", "model.onnx"), input_names=["input_ids", "attention_mask", "position_ids", *kv],
                          output_names=["logits", *pres], dynamic_axes=dyn, opset_version=OPSET, do_constant_folding=True)
    for f in COPIED:
        if os.path.exists(os.path.join(src, f)):
            shutil.copyfile(os.path.join(src, f), os.path.join(tmp, f))
    write_safetensors_f32(os.path.join(tmp, "model.safetensors"), weights)
    manifest = {"model": f"models/tiny/{name}", "opset": OPSET, "torch": torch.__version__, "dtype": "fp32",
                "checks": {"golden_rel_err": golden, "cache_rel_err": cached}, "inputs": export_inputs(src)}
    with open(os.path.join(tmp, "peer-export.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)  # the manifest lands with the files, never before them
    size = os.path.getsize(os.path.join(dst, "onnx", "model.onnx"))
    golden_txt = "no golden file" if golden is None else f"golden {golden:.1e}"
    print(f"{dst}/onnx/model.onnx: {size} bytes, opset {OPSET}; {golden_txt}, cache {cached:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".cache", "peer"))
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    args = ap.parse_args()
    for name in args.models:
        try:
            export_one(name, os.path.abspath(args.out))
        except (UnsupportedPeerModel, PeerExportCheckFailed, FileNotFoundError) as e:
            sys.exit(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
