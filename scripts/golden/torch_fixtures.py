"""Makes the torch .pt fixtures for src/formats/torch.test.ts (Debian python3-torch 1.13; run from the repo root).

  /usr/bin/python3 scripts/golden/torch_fixtures.py

Writes into src/formats/fixtures/:
  torch_small.pt      torch.save of an OrderedDict state dict: bf16/f16/f32 tensors, a 0-d and a 1-d tensor,
                      a view with a storage offset (shares its storage with another entry)
  torch_small.json    the expected values, as raw little-endian bytes in hex per key
  torch_evil*.pt      zips whose data.pkl calls builtins.eval / os.system (never loaded by torch here)
  torch_transposed.pt a non-contiguous tensor
  torch_truncated.pt  torch_small.pt cut short
"""
import collections, io, json, os, pickle, zipfile
import torch

OUT = os.path.join(os.path.dirname(__file__), '..', '..', 'src', 'formats', 'fixtures')
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)

base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.25 - 1.0


class Link(torch.nn.Module):  # upstream-style keys; its state_dict carries `_metadata` (pickled via BUILD)
    def __init__(self):
        super().__init__()
        self.layer_norm = torch.nn.LayerNorm(5)
        self.linear = torch.nn.Linear(4, 3)


link = Link()
torch.nn.init.normal_(link.layer_norm.weight, std=2.0)
sd = link.to(torch.bfloat16).state_dict()
sd['half'] = torch.randn(2, 3).to(torch.float16)
sd['f32'] = base
sd['f32_tail'] = base[1:]  # a view: same storage as 'f32', storage offset 4
sd['scalar'] = torch.tensor(3.5, dtype=torch.bfloat16)  # 0-d
sd['one'] = torch.tensor([-7.25], dtype=torch.float32)  # 1-d, one element
sd['empty'] = torch.zeros(0, 3, dtype=torch.float16)

path = os.path.join(OUT, 'torch_small.pt')
torch.save(sd, path)

def raw(t):
    t = t.contiguous()
    return t.view(torch.int16).numpy().tobytes().hex() if t.element_size() == 2 else t.numpy().tobytes().hex()

ref = {k: {'dtype': {torch.bfloat16: 'bf16', torch.float16: 'f16', torch.float32: 'f32'}[v.dtype],
           'shape': list(v.shape), 'hex': raw(v)} for k, v in sd.items()}
with open(os.path.join(OUT, 'torch_small.json'), 'w') as f:
    json.dump(ref, f)

# Hostile pickles (never unpickled here); torch.load(weights_only=False) would run them:
#  evil:      GLOBAL builtins.eval, REDUCE with a string
#  evil_os:   a real state dict whose value is GLOBAL os.system REDUCE ('touch /tmp/pwned',)
#  evil_inst: INST os system (the protocol-0 way to call a global)
evils = {
    'evil': b'\x80\x02cbuiltins\neval\nq\x00X\x1a\x00\x00\x00__import__("os").getpid()q\x01\x85q\x02Rq\x03.',
    'evil_os': b'\x80\x02ccollections\nOrderedDict\n)R(X\x01\x00\x00\x00wcos\nsystem\nX\x10\x00\x00\x00touch /tmp/pwned\x85Ru.',
    'evil_inst': b'\x80\x02(X\x10\x00\x00\x00touch /tmp/pwnedios\nsystem\n.',
}
for name, pkl in evils.items():
    with zipfile.ZipFile(os.path.join(OUT, f'torch_{name}.pt'), 'w', zipfile.ZIP_STORED) as z:
        z.writestr(f'torch_{name}/data.pkl', pkl)
        z.writestr(f'torch_{name}/version', '3\n')

# A non-contiguous tensor (a transpose) is saved as such, strides (1, 2): the reader refuses it.
torch.save(collections.OrderedDict(w=torch.arange(6, dtype=torch.float32).reshape(3, 2).t()),
           os.path.join(OUT, 'torch_transposed.pt'))

data = open(path, 'rb').read()
open(os.path.join(OUT, 'torch_truncated.pt'), 'wb').write(data[: len(data) - 200])
print('wrote', OUT, len(data), 'bytes')
