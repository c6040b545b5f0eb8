/**
 * PyTorch `.pt` state dicts (the zip format `torch.save` writes since 1.6), read and written without Python.
 *
 * A file is a zip of STORED entries under one folder: `<archive>/data.pkl` (a pickle of the state dict whose
 * tensors are `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)` calls,
 * storages being persistent ids `('storage', torch.BFloat16Storage, key, location, numel)`),
 * `<archive>/data/<key>` (raw little-endian storage bytes, 64-byte aligned via an "FB" padding extra field),
 * `<archive>/version` ("3\n") and, since torch 2.1, `<archive>/byteorder` ("little").
 *
 * Pickles can run arbitrary code, so the reader is a tiny stack machine that knows only the opcodes state
 * dict pickles use and resolves only an allowlist of globals; it never calls anything it did not define
 * itself. Anything else is refused with UnsafeCheckpoint before any value is built from it.
 */
import { CorruptCheckpoint, InvalidArgument, UnsafeCheckpoint } from '../errors';
import { showValue } from '../util/show';
import type { FloatDType } from './dtype';
import { readZip, writeZip } from './zip';

export interface PtTensor {
  dtype: FloatDType;
  shape: number[];
  /** Contiguous row-major little-endian element bytes (a copy, not a view into the file). */
  bytes: Uint8Array;
}

const ELEM_BYTES: Readonly<Record<FloatDType, number>> = { f32: 4, f16: 2, bf16: 2 };
const STORAGE_DTYPE: Readonly<Record<string, FloatDType>> = {
  'torch.FloatStorage': 'f32', 'torch.HalfStorage': 'f16', 'torch.BFloat16Storage': 'bf16',
};
const DTYPE_STORAGE: Readonly<Record<FloatDType, string>> = { f32: 'FloatStorage', f16: 'HalfStorage', bf16: 'BFloat16Storage' };
const ALLOWED_CALLS = ['collections.OrderedDict', 'torch._utils._rebuild_tensor_v2', 'torch._utils._rebuild_parameter'];

const corrupt = (file: string, what: string) =>
  new CorruptCheckpoint(`${file}: ${what}; re-download the file, or re-save it with torch.save(model.state_dict())`);

const TORCH_ZIP = {
  kind: 'a torch.save file from torch >= 1.6',
  fix: 're-download the file, or re-save it with torch.save(model.state_dict())',
  compressedHint: 'torch.save writes stored entries only',
} as const;
const u16 = (b: Uint8Array, o: number) => b[o]! | (b[o + 1]! << 8);
const u32 = (b: Uint8Array, o: number) => (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;

// ------------------------------------------------------------------------------------------- unpickle

class Global { constructor(readonly name: string) {} }
class Dict { readonly map = new Map<unknown, unknown>(); constructor(readonly ordered: boolean) {} }
class Tuple { constructor(readonly items: unknown[]) {} }
interface Storage { dtype: FloatDType; key: string; numel: number }
class Tensor { constructor(readonly t: PtTensor) {} }

const OPNAMES: Record<number, string> = {
  0x63: 'GLOBAL', 0x93: 'STACK_GLOBAL', 0x52: 'REDUCE', 0x62: 'BUILD', 0x69: 'INST', 0x6f: 'OBJ', 0x81: 'NEWOBJ',
  0x92: 'NEWOBJ_EX', 0x50: 'PERSID', 0x82: 'EXT1', 0x83: 'EXT2', 0x84: 'EXT4', 0x49: 'INT', 0x4c: 'LONG',
  0x53: 'STRING', 0x56: 'UNICODE', 0x46: 'FLOAT', 0x8b: 'LONG4', 0x42: 'BINBYTES', 0x43: 'SHORT_BINBYTES',
  0x54: 'BINSTRING', 0x55: 'SHORT_BINSTRING', 0x8f: 'EMPTY_SET', 0x90: 'ADDITEMS', 0x91: 'FROZENSET',
  0x96: 'BYTEARRAY8', 0x97: 'NEXT_BUFFER', 0x98: 'READONLY_BUFFER', 0x8e: 'BINBYTES8', 0x8d: 'BINUNICODE8',
  0x67: 'GET', 0x70: 'PUT', 0x64: 'DICT', 0x6c: 'LIST', 0x30: 'POP', 0x31: 'POP_MARK', 0x32: 'DUP',
};

/** Runs the allowed subset of the pickle machine over data.pkl and returns the top-level value. */
function unpickle(pkl: Uint8Array, file: string, storage: (pid: unknown) => Storage): unknown {
  const unsafe = (what: string) => new UnsafeCheckpoint(`${file}: data.pkl uses ${what}, which a state dict of ` +
    'bf16/f16/f32 tensors never needs; the file was refused and nothing in it was executed. Only load files from ' +
    'sources you trust, or re-save the tensors alone with torch.save(model.state_dict())');
  const bad = (what: string) => corrupt(file, `data.pkl ${what}`);
  const dv = new DataView(pkl.buffer, pkl.byteOffset, pkl.byteLength);
  let stack: unknown[] = [];
  const marks: unknown[][] = [];
  const memo = new Map<number, unknown>();
  let p = 0;
  const need = (n: number) => {
    if (p + n > pkl.length) throw bad('ends in the middle of an opcode (truncated)');
    const at = p;
    p += n;
    return at;
  };
  const pop = () => { if (stack.length === 0) throw bad('pops an empty stack'); return stack.pop(); };
  const popMark = () => {
    const items = stack;
    const prev = marks.pop();
    if (!prev) throw bad('has no MARK to pop to');
    stack = prev;
    return items;
  };
  const top = () => { if (stack.length === 0) throw bad('reads an empty stack'); return stack[stack.length - 1]; };
  const str = (n: number) => {
    const at = need(n);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(pkl.subarray(at, p));
    } catch {
      throw bad(`holds a string that is not UTF-8 (at byte ${at})`);
    }
  };
  const line = () => {
    const e = pkl.indexOf(0x0a, p);
    if (e < 0) throw bad('has an unterminated GLOBAL');
    const s = new TextDecoder().decode(pkl.subarray(p, e));
    p = e + 1;
    return s;
  };
  const global = (name: string) => {
    // own keys only: `in` would also find Object.prototype's (constructor, toString, ...)
    if (!ALLOWED_CALLS.includes(name) && !Object.hasOwn(STORAGE_DTYPE, name)) throw unsafe(`the global ${name}`);
    return new Global(name);
  };
  const setItems = (d: unknown, kv: unknown[]) => {
    if (!(d instanceof Dict)) throw bad('sets items on something that is not a dict');
    for (let i = 0; i + 1 < kv.length; i += 2) d.map.set(kv[i], kv[i + 1]);
  };
  const append = (l: unknown, xs: unknown[]) => {
    if (!Array.isArray(l)) throw bad('appends to something that is not a list');
    l.push(...xs);
  };
  for (;;) {
    const op = pkl[need(1)]!;
    switch (op) {
      case 0x80: need(1); break; // PROTO
      case 0x95: need(8); break; // FRAME (protocol 4): framing only, the data follows inline
      case 0x2e: return pop(); // STOP
      case 0x28: marks.push(stack); stack = []; break; // MARK
      case 0x7d: stack.push(new Dict(false)); break; // EMPTY_DICT
      case 0x5d: stack.push([]); break; // EMPTY_LIST
      case 0x29: stack.push(new Tuple([])); break; // EMPTY_TUPLE
      case 0x58: stack.push(str(u32(pkl, need(4)))); break; // BINUNICODE
      case 0x8c: stack.push(str(pkl[need(1)]!)); break; // SHORT_BINUNICODE
      case 0x71: memo.set(pkl[need(1)]!, top()); break; // BINPUT
      case 0x72: memo.set(u32(pkl, need(4)), top()); break; // LONG_BINPUT
      case 0x94: memo.set(memo.size, top()); break; // MEMOIZE
      case 0x68: case 0x6a: { // BINGET, LONG_BINGET
        const i = op === 0x68 ? pkl[need(1)]! : u32(pkl, need(4));
        if (!memo.has(i)) throw bad(`reads memo slot ${i}, which was never written`);
        stack.push(memo.get(i)); break;
      }
      case 0x4a: stack.push(dv.getInt32(need(4), true)); break; // BININT
      case 0x4b: stack.push(pkl[need(1)]!); break; // BININT1
      case 0x4d: stack.push(u16(pkl, need(2))); break; // BININT2
      case 0x8a: { // LONG1: little-endian two's complement, n bytes
        const n = pkl[need(1)]!, at = need(n);
        let v = 0n;
        for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(pkl[at + i]!);
        if (n > 0 && pkl[at + n - 1]! & 0x80) v -= 1n << BigInt(8 * n);
        if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER))
          throw bad(`holds the integer ${v}, too large for a size`);
        stack.push(Number(v)); break;
      }
      case 0x47: stack.push(dv.getFloat64(need(8), false)); break; // BINFLOAT (big-endian)
      case 0x74: { const t = new Tuple(popMark()); stack.push(t); break; } // TUPLE (popMark swaps `stack` first)
      case 0x85: stack.push(new Tuple([pop()])); break; // TUPLE1
      case 0x86: { const b = pop(), a = pop(); stack.push(new Tuple([a, b])); break; } // TUPLE2
      case 0x87: { const c = pop(), b = pop(), a = pop(); stack.push(new Tuple([a, b, c])); break; } // TUPLE3
      case 0x73: { const v = pop(), k = pop(); setItems(top(), [k, v]); break; } // SETITEM
      case 0x75: { const kv = popMark(); setItems(top(), kv); break; } // SETITEMS
      case 0x61: { const v = pop(); append(top(), [v]); break; } // APPEND
      case 0x65: { const xs = popMark(); append(top(), xs); break; } // APPENDS
      case 0x89: stack.push(false); break; // NEWFALSE
      case 0x88: stack.push(true); break; // NEWTRUE
      case 0x4e: stack.push(null); break; // NONE
      case 0x51: stack.push(storage(pop())); break; // BINPERSID
      case 0x63: stack.push(global(`${line()}.${line()}`)); break; // GLOBAL
      case 0x93: { // STACK_GLOBAL (protocol 4)
        const name = pop(), mod = pop();
        if (typeof mod !== 'string' || typeof name !== 'string') throw bad('has a STACK_GLOBAL without strings');
        stack.push(global(`${mod}.${name}`)); break;
      }
      case 0x52: { // REDUCE: only the allowlisted constructors, implemented here
        const args = pop(), fn = pop();
        if (!(fn instanceof Global) || !(args instanceof Tuple)) throw bad('calls something that is not a global');
        stack.push(call(fn.name, args.items, file, unsafe)); break;
      }
      case 0x62: { // BUILD: only OrderedDict's attribute dict (a Module state dict's `_metadata`), which is dropped
        const state = pop();
        if (!(top() instanceof Dict && (top() as Dict).ordered)) throw unsafe('BUILD on something other than an OrderedDict');
        if (state !== null && !(state instanceof Dict)) throw unsafe('BUILD with a state that is not a dict');
        break;
      }
      default:
        throw unsafe(`the opcode ${OPNAMES[op] ?? '0x' + op.toString(16).padStart(2, '0')} (at byte ${p - 1})`);
    }
  }
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const ints = (v: unknown) => (v instanceof Tuple && v.items.every(isInt) ? (v.items as number[]) : null);

function call(name: string, args: unknown[], file: string, unsafe: (what: string) => Error): unknown {
  if (name === 'collections.OrderedDict') {
    if (args.length !== 0) throw unsafe('OrderedDict with constructor arguments');
    return new Dict(true);
  }
  if (name === 'torch._utils._rebuild_parameter') { // (data, requires_grad, backward_hooks): a Parameter is its tensor
    if (!(args[0] instanceof Tensor)) throw corrupt(file, '_rebuild_parameter without a tensor');
    return args[0];
  }
  if (name !== 'torch._utils._rebuild_tensor_v2') throw unsafe(`a call to ${name}`);
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  const [st, offset, sizeT, strideT] = args as [Storage & { bytes: Uint8Array }, unknown, unknown, unknown];
  const shape = ints(sizeT), stride = ints(strideT);
  if (args.length < 6 || typeof st !== 'object' || st === null || !('bytes' in st) || !isInt(offset) || !shape || !stride ||
      stride.length !== shape.length) {
    throw corrupt(file, 'a tensor is rebuilt with arguments other than (storage, offset, size, stride, ...)');
  }
  const numel = shape.reduce((a, b) => a * b, 1);
  const what = `tensor of shape [${shape}] (storage ${st.key})`;
  let expect = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i]! !== 1 && numel > 0 && stride[i] !== expect) {
      throw corrupt(file, `${what} has strides [${stride}], not contiguous; save t.contiguous() (or t.clone()) instead`);
    }
    expect *= shape[i]!;
  }
  if (offset + numel > st.numel) throw corrupt(file, `${what} reads elements ${offset}..${offset + numel} of a storage of ${st.numel}`);
  const e = ELEM_BYTES[st.dtype];
  return new Tensor({ dtype: st.dtype, shape, bytes: st.bytes.slice(offset * e, (offset + numel) * e) });
}

/**
 * Reads a `torch.save(state_dict)` file into its tensors, in file order. `name` is used in error messages.
 * Throws UnsafeCheckpoint for any pickle content beyond tensors and ordered dicts (nothing is executed),
 * CorruptCheckpoint for damaged files or non-contiguous tensors.
 */
export function readTorchStateDict(bytes: Uint8Array, name: string): Map<string, PtTensor> {
  const entries = readZip(bytes, name, TORCH_ZIP);
  const pklName = [...entries.keys()].find((k) => k.endsWith('/data.pkl') && k.indexOf('/') === k.length - 9);
  if (!pklName) throw corrupt(name, 'the zip holds no <archive>/data.pkl; it is not a torch.save file');
  const prefix = pklName.slice(0, -8);
  const storages = new Map<string, Storage & { bytes: Uint8Array }>();
  const storage = (pid: unknown): Storage => {
    const f = pid instanceof Tuple ? pid.items : [];
    const [tag, type, key, , numel] = f;
    if (f.length !== 5 || tag !== 'storage' || !(type instanceof Global) || typeof key !== 'string' || !isInt(numel)) {
      throw corrupt(name, 'data.pkl has a persistent id other than (\'storage\', type, key, location, numel)');
    }
    const dtype = Object.hasOwn(STORAGE_DTYPE, type.name) ? STORAGE_DTYPE[type.name] : undefined;
    if (!dtype) throw corrupt(name, `storage ${key} has type ${type.name}; only bf16/f16/f32 tensors are supported, convert with .float()`);
    const seen = storages.get(key);
    if (seen) return seen; // shared storage (views of one tensor): one entry, several tensors
    const data = entries.get(`${prefix}data/${key}`);
    if (!data) throw corrupt(name, `the zip lacks ${prefix}data/${key}, the bytes of storage ${key}`);
    if (data.length !== numel * ELEM_BYTES[dtype]) {
      throw corrupt(name, `storage ${key} holds ${data.length} bytes, expected ${numel} × ${ELEM_BYTES[dtype]}`);
    }
    const s = { dtype, key, numel, bytes: data };
    storages.set(key, s);
    return s;
  };
  const root = unpickle(entries.get(pklName)!, name, storage);
  if (!(root instanceof Dict)) throw corrupt(name, 'data.pkl does not hold a dict; save model.state_dict(), not the model');
  const out = new Map<string, PtTensor>();
  for (const [k, v] of root.map) {
    if (typeof k !== 'string' || !(v instanceof Tensor)) {
      throw corrupt(name, `entry ${showValue(k)} is not a tensor; save only model.state_dict() (no optimizer, step, ...)`);
    }
    out.set(k, v.t);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------- write

/** Protocol-2 pickle of an OrderedDict of `_rebuild_tensor_v2` calls, one storage per tensor, no memo: only
 * opcodes torch's `weights_only` unpickler accepts (1.13 lacks SHORT_BINUNICODE, so strings are BINUNICODE). */
function pickleStateDict(tensors: [string, PtTensor][]): Uint8Array {
  const out: number[] = [0x80, 2];
  const enc = new TextEncoder();
  const bytes = (s: string) => out.push(...enc.encode(s));
  const uni = (s: string) => {
    const b = enc.encode(s);
    out.push(0x58, b.length & 0xff, (b.length >> 8) & 0xff, (b.length >> 16) & 0xff, b.length >>> 24);
    for (const x of b) out.push(x);
  };
  const int = (v: number) => {
    if (v < 256) out.push(0x4b, v);
    else if (v < 65536) out.push(0x4d, v & 0xff, v >> 8);
    else if (v < 2 ** 31) out.push(0x4a, v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >>> 24);
    else { out.push(0x8a, 8); let x = BigInt(v); for (let i = 0; i < 8; i++) { out.push(Number(x & 0xffn)); x >>= 8n; } }
  };
  const tuple = (xs: number[]) => { out.push(0x28); xs.forEach(int); out.push(0x74); };
  const orderedDict = () => { bytes('ccollections\nOrderedDict\n'); out.push(0x29, 0x52); };
  orderedDict();
  out.push(0x28); // MARK for SETITEMS
  tensors.forEach(([key, t], i) => {
    const numel = t.shape.reduce((a, b) => a * b, 1);
    const stride = t.shape.map((_, d) => t.shape.slice(d + 1).reduce((a, b) => a * b, 1));
    uni(key);
    bytes('ctorch._utils\n_rebuild_tensor_v2\n');
    out.push(0x28, 0x28); // MARK args, MARK persistent id
    uni('storage'); bytes(`ctorch\n${DTYPE_STORAGE[t.dtype]}\n`); uni(String(i)); uni('cpu'); int(numel);
    out.push(0x74, 0x51); // TUPLE, BINPERSID
    int(0); tuple(t.shape); tuple(stride);
    out.push(0x89); // requires_grad False
    orderedDict(); // backward_hooks
    out.push(0x74, 0x52); // TUPLE, REDUCE
  });
  out.push(0x75, 0x2e); // SETITEMS, STOP
  return Uint8Array.from(out);
}

/**
 * Writes tensors as a `torch.save` zip that `torch.load(path, weights_only=True)` reads (checked with torch
 * 1.13): archive/data.pkl, archive/data/0..n-1 (64-byte aligned), archive/version, archive/byteorder.
 */
export function writeTorchStateDict(tensors: Map<string, PtTensor>): Uint8Array {
  const list = [...tensors];
  for (const [key, t] of list) {
    const e = ELEM_BYTES[t.dtype];
    if (e === undefined) throw new InvalidArgument(`tensor "${key}" has dtype ${t.dtype}; .pt export takes f32, f16 or bf16`);
    if (!t.shape.every((d) => Number.isSafeInteger(d) && d >= 0))
      throw new InvalidArgument(`tensor "${key}" has shape [${t.shape}], expected non-negative integers`);
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (t.bytes.length !== n * e)
      throw new InvalidArgument(`tensor "${key}" has ${t.bytes.length} bytes, expected ${n} × ${e} for shape [${t.shape}] ${t.dtype}`);
  }
  const enc = new TextEncoder();
  const files: [string, Uint8Array][] = [['archive/data.pkl', pickleStateDict(list)],
    ...list.map(([, t], i): [string, Uint8Array] => [`archive/data/${i}`, t.bytes]),
    ['archive/version', enc.encode('3\n')], ['archive/byteorder', enc.encode('little')]];
  return writeZip(files, { align: 64, what: '.pt export', tooLargeHint: 'export as safetensors' });
}
