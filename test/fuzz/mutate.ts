/**
 * Seeded mutations for the fuzzing suite (test/fuzz/), over bytes and over the structures our readers parse:
 * JSON documents, safetensors headers, zip archives, pickles and GGUF headers. Every function takes an Rng
 * (src/util/rng.ts) and nothing else random, so that a case is reproduced from its seed alone.
 *
 * The structural mutations aim at what a parser decides from the file: lengths and offsets pushed past the end
 * or to huge values, overlapping ranges, swapped type strings and opcodes, hostile names. The byte mutations
 * (flips, splices, truncations) cover what the structural ones do not think of.
 */
import type { Rng } from '../../src/util/rng';

export const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)]!;
export const chance = (rng: Rng, p: number) => rng.next() < p;
const utf8 = new TextEncoder();
const text = (b: Uint8Array) => new TextDecoder().decode(b);

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) (out.set(p, o), (o += p.length));
  return out;
}

/** Sizes and offsets that break parsers: 0, ±1 around the input's size, powers of two at type edges, a terabyte, 2^64 - 1. */
export function interesting(size: number): bigint[] {
  const s = BigInt(size);
  return [0n, 1n, 7n, 8n, 0x7fn, 0x80n, 0xffn, 0xffffn, 0x7fffffffn, 0x80000000n, 0xffffffffn, 0x100000000n, 2n ** 53n - 1n,
    2n ** 53n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n, 10n ** 12n, s - 1n > 0n ? s - 1n : 0n, s, s + 1n, s * 2n, s + 1000n];
}

/** Invalid UTF-8: a stray continuation byte, an overlong NUL, a surrogate, a code point past U+10FFFF, a cut sequence, 0xff. */
export const BAD_UTF8: readonly number[][] = [[0x80], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0xff],
  [0xfe, 0xff], [0xc3]];

// ------------------------------------------------------------------------------------------- bytes

/** Writes `v` little-endian over `width` bytes at `at` (bytes past the end are dropped). */
export function putUint(b: Uint8Array, at: number, width: number, v: bigint): void {
  for (let i = 0; i < width && at + i < b.length; i++) b[at + i] = Number((v >> BigInt(8 * i)) & 0xffn);
}

export function getUint(b: Uint8Array, at: number, width: number): bigint {
  let v = 0n;
  for (let i = width - 1; i >= 0; i--) v = (v << 8n) | BigInt(b[at + i] ?? 0);
  return v;
}

/** One unstructured mutation: bit flip, byte set, splice, duplication, deletion, an integer field overwritten, invalid UTF-8. */
export function mutateBytes(rng: Rng, input: Uint8Array): Uint8Array {
  const b = input.slice();
  const at = b.length ? rng.int(b.length) : 0;
  switch (rng.int(9)) {
    case 0: if (b.length) b[at] ^= 1 << rng.int(8); return b;
    case 1: if (b.length) b[at] = pick(rng, [0, 0xff, 0x7f, 0x80, 0x22, 0x7b, 0x7d, 0x5b, 0x0a, 0x2e, 0x50, 0x00]); return b;
    case 2: return b.slice(0, at); // truncation anywhere
    case 3: { // delete a range
      const n = 1 + rng.int(Math.min(64, b.length || 1));
      return concat(b.subarray(0, at), b.subarray(at + n));
    }
    case 4: { // duplicate a range
      const n = 1 + rng.int(Math.min(256, b.length || 1));
      return concat(b.subarray(0, at + n), b.subarray(at, at + n), b.subarray(at + n));
    }
    case 5: { // an integer field pushed to an interesting value
      const width = pick(rng, [1, 2, 4, 8]);
      putUint(b, at, width, pick(rng, interesting(b.length)));
      return b;
    }
    case 6: return concat(b.subarray(0, at), Uint8Array.from(pick(rng, BAD_UTF8)), b.subarray(at));
    case 7: { // random bytes
      const n = 1 + rng.int(16);
      for (let i = 0; i < n && at + i < b.length; i++) b[at + i] = rng.int(256);
      return b;
    }
    default: return concat(b, Uint8Array.from({ length: 1 + rng.int(64) }, () => rng.int(256))); // trailing garbage
  }
}

/** `b` cut at `at`, or at a point 1 or 2 bytes around it (`at` a structural boundary). */
export const truncateNear = (rng: Rng, b: Uint8Array, at: number) => b.slice(0, Math.max(0, Math.min(b.length, at + rng.int(5) - 2)));

// -------------------------------------------------------------------------------------------- JSON

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Text of an array nested `depth` deep. */
export const deepJson = (depth: number, inner = '0') => '['.repeat(depth) + inner + ']'.repeat(depth);

/** Values of every type, including edge numbers, long strings and deep nesting. */
export function oddValue(rng: Rng): Json {
  switch (rng.int(12)) {
    case 0: return null;
    case 1: return pick(rng, [true, false]);
    case 2: return pick(rng, [0, -1, 1, 0.5, -0.0, 1e308, -1e308, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, 1e21, 1e-320]);
    case 3: return pick(rng, ['', 'x', '..', '../../etc/passwd', '/abs', 'a\\b', '\u0000', '\uffff', '{question}', '<|im_start|>']);
    case 4: return 'A'.repeat(1 + rng.int(70000));
    case 5: return [];
    case 6: return {};
    case 7: return JSON.parse(deepJson(1 + rng.int(64))) as Json;
    case 8: return Array.from({ length: rng.int(8) }, () => rng.int(100));
    case 9: return JSON.parse('{"__proto__": {"polluted": true}, "constructor": "x", "toString": 1}') as Json;
    case 10: return pick(rng, ['NaN', 'Infinity', '-1', '1e9', '0x10', ' 1']);
    default: return [null, 'x', 1];
  }
}

/** Every (parent, key) slot of a JSON tree, depth first. */
function slots(v: Json, out: [Json[] | { [k: string]: Json }, string | number][] = [], budget = { n: 5000 }) {
  if (budget.n-- <= 0 || v === null || typeof v !== 'object') return out;
  if (Array.isArray(v)) v.forEach((x, i) => (out.push([v, i]), slots(x, out, budget)));
  else for (const k of Object.keys(v)) (out.push([v, k]), slots(v[k]!, out, budget));
  return out;
}

/**
 * One structural mutation of a parsed JSON value (a fresh copy): a value replaced by an odd one or by a
 * value of another slot, a key deleted or renamed, an array emptied or doubled.
 */
export function mutateJsonValue(rng: Rng, value: unknown): Json {
  const root = structuredClone(value) as Json;
  const all = slots(root);
  if (!all.length) return oddValue(rng);
  const [parent, key] = pick(rng, all);
  const get = () => (parent as Record<string | number, Json>)[key]!;
  const set = (v: Json) => ((parent as Record<string | number, Json>)[key] = v);
  switch (rng.int(7)) {
    case 0: case 1: set(oddValue(rng)); break;
    case 2: set(swapType(rng, get())); break;
    case 3: { const [p2, k2] = pick(rng, all); set(structuredClone((p2 as Record<string | number, Json>)[k2]!)); break; }
    case 4: if (Array.isArray(parent)) parent.splice(key as number, 1); else delete parent[key as string]; break;
    case 5: if (!Array.isArray(parent)) { // a key renamed: the reader misses it or meets an unknown one
      const v = get();
      delete parent[key as string];
      parent[`${key as string}${pick(rng, ['_', 'X', ' ', '\u0000'])}`] = v;
    } break;
    default: { const v = get(); if (Array.isArray(v)) set(rng.int(2) ? [] : [...v, ...v]); else set([v as Json]); }
  }
  return root;
}

/** The same value as another JSON type (number ↔ string, scalar ↔ array, ...). */
function swapType(rng: Rng, v: Json): Json {
  if (typeof v === 'number') return pick(rng, [String(v), [v], v === 0 ? -1 : -v, v * 2 ** 40, v + 0.5]);
  if (typeof v === 'string') return pick(rng, [Number(v) || 0, [v], null, v + v, v.toUpperCase()]);
  if (typeof v === 'boolean') return pick(rng, [Number(v), String(v), !v]);
  if (Array.isArray(v)) return pick(rng, [v.length, {}, v[0] ?? null]);
  return pick(rng, [[], 'object', 0]);
}

/**
 * One mutation of JSON text: a structural one (parse, mutate, print), a duplicated key, the text cut at a token
 * boundary, invalid UTF-8, deep nesting, a BOM, or a byte mutation.
 */
export function mutateJsonText(rng: Rng, input: Uint8Array): Uint8Array {
  const s = text(input);
  let parsed: unknown;
  let ok = true;
  try { parsed = JSON.parse(s); } catch { ok = false; }
  const tokens = [...s.matchAll(/[{}[\]:,"]/g)].map((m) => m.index!);
  switch (rng.int(9)) {
    case 0: case 1: case 2:
      if (ok) return utf8.encode(JSON.stringify(mutateJsonValue(rng, parsed), null, pick(rng, [0, 2])));
      return mutateBytes(rng, input);
    case 3: { // a key given twice: the second wins in JSON.parse, a reader may look at the first
      const m = [...s.matchAll(/"([^"\\]{1,60})"\s*:\s*/g)];
      if (!m.length) return mutateBytes(rng, input);
      const k = pick(rng, m);
      return utf8.encode(`${s.slice(0, k.index!)}"${k[1]}": ${JSON.stringify(oddValue(rng))}, ${s.slice(k.index!)}`);
    }
    case 4: return tokens.length ? truncateNear(rng, input, utf8.encode(s.slice(0, pick(rng, tokens))).length) : input.slice(0, -1);
    case 5: { // invalid UTF-8 inside a string or between tokens
      const at = tokens.length ? utf8.encode(s.slice(0, pick(rng, tokens) + 1)).length : 0;
      return concat(input.subarray(0, at), Uint8Array.from(pick(rng, BAD_UTF8)), input.subarray(at));
    }
    case 6: { // deep nesting in place of a value
      const depth = pick(rng, [100, 1000, 10_000, 100_000]); // 100 000 is past every recursive walk's stack
      const inner = pick(rng, ['[', '{"a":']);
      const close = inner === '[' ? ']' : '}';
      const deep = `${inner.repeat(depth)}0${close.repeat(depth)}`;
      if (ok && parsed && typeof parsed === 'object') {
        const m = [...s.matchAll(/:\s*/g)];
        if (m.length) {
          const at = pick(rng, m).index! + 1;
          const rest = s.slice(at).replace(/^\s*("(?:[^"\\]|\\.)*"|-?[\d.eE+-]+|true|false|null)/, '');
          if (rest !== s.slice(at)) return utf8.encode(`${s.slice(0, at)}${deep}${rest}`);
        }
      }
      return utf8.encode(deep);
    }
    case 7: return concat(Uint8Array.from(pick(rng, [[0xef, 0xbb, 0xbf], [0xff, 0xfe], [0x00]])), input);
    default: return mutateBytes(rng, input);
  }
}

// ------------------------------------------------------------------------------------- safetensors

export interface StParts { headerLen: bigint; header: Record<string, unknown>; headerText: string; data: Uint8Array }

export function splitSafetensors(b: Uint8Array): StParts {
  const headerLen = getUint(b, 0, 8);
  const n = Number(headerLen);
  const headerText = text(b.subarray(8, 8 + n));
  return { headerLen, header: JSON.parse(headerText) as Record<string, unknown>, headerText, data: b.subarray(8 + n) };
}

export function joinSafetensors(headerText: string, data: Uint8Array, lenField?: bigint): Uint8Array {
  const h = utf8.encode(headerText);
  const len = new Uint8Array(8);
  putUint(len, 0, 8, lenField ?? BigInt(h.length));
  return concat(len, h, data);
}

/** Offsets where a safetensors file changes meaning: the length field, the header's end, each tensor's start and end. */
export function safetensorsBoundaries(b: Uint8Array): number[] {
  const { headerLen, header } = splitSafetensors(b);
  const start = 8 + Number(headerLen);
  const out = [0, 4, 8, start - 1, start];
  for (const v of Object.values(header)) {
    const off = (v as { data_offsets?: number[] }).data_offsets;
    if (off) out.push(start + off[0]!, start + off[1]!);
  }
  return [...new Set(out)].sort((a, b) => a - b);
}

const ST_DTYPES = ['BOOL', 'U8', 'I8', 'I16', 'U16', 'F16', 'BF16', 'I32', 'U32', 'F32', 'F64', 'I64', 'U64', 'F8_E4M3', 'f32', '', 'I4'];

/** One structural mutation of a safetensors file: header fields, the length field, the data area. */
export function mutateSafetensors(rng: Rng, input: Uint8Array): Uint8Array {
  let parts: StParts;
  try {
    parts = splitSafetensors(input);
  } catch {
    return mutateBytes(rng, input);
  }
  const { header, data } = parts;
  if (!header || typeof header !== 'object' || Array.isArray(header)) return mutateBytes(rng, input);
  const names = Object.keys(header).filter((k) => k !== '__metadata__');
  const name = names.length ? pick(rng, names) : '';
  const t = header[name] as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | undefined;
  const other = header[pick(rng, names.length ? names : [''])] as { data_offsets?: number[] } | undefined;
  const huge = () => Number(pick(rng, interesting(data.length)));
  const rebuild = (h: Record<string, unknown>, pad = true) => {
    let s = JSON.stringify(h);
    if (pad) s += ' '.repeat((8 - (s.length % 8)) % 8);
    return joinSafetensors(s, data);
  };
  switch (rng.int(14)) {
    case 0: if (t) t.dtype = pick(rng, ST_DTYPES); break;
    case 1: if (t) {
      const shape = Array.isArray(t.shape) ? (t.shape as number[]) : [];
      t.shape = pick(rng, [[], [0], [huge()], [2 ** 31, 2 ** 31], [-1], [1.5], ['4'], null, [...shape].reverse(), [...shape, 1],
        shape.slice(1), [2 ** 53, 2 ** 53, 2 ** 53]]);
    } break;
    case 2: if (t && Array.isArray(t.data_offsets)) { const o = t.data_offsets as number[]; o[rng.int(2)] = huge(); } break;
    case 3: if (t && other?.data_offsets) t.data_offsets = [...other.data_offsets]; break; // two tensors on one range
    case 4: if (t && Array.isArray(t.data_offsets)) { // overlapping ranges, shifted by a few bytes
      const [a, b] = t.data_offsets as number[]; const d = 1 + rng.int(8); t.data_offsets = [Math.max(0, a! - d), b! - d];
    } break;
    case 5: if (t) t.data_offsets = pick(rng, [[5, 1], [-8, 0], [0.5, 4.5], ['0', '4'], [0], [0, 4, 8], null]); break;
    case 6: header.__metadata__ = pick(rng, [{ format: 1 }, [], 'pt', { a: null }, { a: { b: 'c' } }, null]); break;
    case 7: return joinSafetensors(parts.headerText, data, pick(rng, interesting(input.length))); // the length field lies
    case 8: { // duplicated tensor name in the header text
      if (!name) break;
      const entry = `${JSON.stringify(name)}:${JSON.stringify(header[name])}`;
      return joinSafetensors(`{${entry},${parts.headerText.trim().slice(1)}`, data);
    }
    case 9: if (name) delete header[name]; break; // a tensor missing: the data no longer tiles
    case 10: return concat(rebuild(header), Uint8Array.from({ length: 1 + rng.int(16) }, () => 0)); // trailing bytes
    case 11: return joinSafetensors(parts.headerText, data.subarray(0, rng.int(data.length + 1))); // data cut short
    case 12: { // the header in other clothes: not an object, deep, not UTF-8
      const bad = pick(rng, ['[]', '"x"', 'null', `{"a":${deepJson(50_000)}}`, '{"a":1']);
      if (rng.int(2)) return joinSafetensors(bad, data);
      const h = utf8.encode(parts.headerText);
      return joinSafetensors('', concat(h.subarray(0, 2), Uint8Array.from(pick(rng, BAD_UTF8)), h.subarray(2), data), BigInt(h.length + 1));
    }
    default: if (t) header[`${name}${pick(rng, ['.x', '\u0000', ''])}`] = { ...t, data_offsets: [0, huge()] }; break;
  }
  return rebuild(header, rng.int(4) !== 0);
}

// --------------------------------------------------------------------------------------------- zip

export interface ZipEntryAt { name: string; nameBytes: number; central: number; local: number; dataStart: number; size: number }
export interface ZipLayout { entries: ZipEntryAt[]; eocd: number; cdOffset: number }

/** Where each part of a zip written by writeZip lies (no zip64); tolerant, for finding the fields to damage. */
export function zipLayout(b: Uint8Array): ZipLayout | null {
  let eocd = -1;
  for (let o = b.length - 22; o >= Math.max(0, b.length - 22 - 0xffff); o--) {
    if (Number(getUint(b, o, 4)) === 0x06054b50) { eocd = o; break; }
  }
  if (eocd < 0) return null;
  const count = Number(getUint(b, eocd + 10, 2));
  const cdOffset = Number(getUint(b, eocd + 16, 4));
  const entries: ZipEntryAt[] = [];
  let p = cdOffset;
  for (let i = 0; i < count && p + 46 <= b.length; i++) {
    if (Number(getUint(b, p, 4)) !== 0x02014b50) break;
    const nameLen = Number(getUint(b, p + 28, 2));
    const extra = Number(getUint(b, p + 30, 2));
    const comment = Number(getUint(b, p + 32, 2));
    const local = Number(getUint(b, p + 42, 4));
    const dataStart = local + 30 + Number(getUint(b, local + 26, 2)) + Number(getUint(b, local + 28, 2));
    entries.push({ name: text(b.subarray(p + 46, p + 46 + nameLen)), nameBytes: nameLen, central: p, local, dataStart,
      size: Number(getUint(b, p + 24, 4)) });
    p += 46 + nameLen + extra + comment;
  }
  return { entries, eocd, cdOffset };
}

/** Every offset where a zip's parts start or end: local headers, names, data, central entries, the end record. */
export function zipBoundaries(b: Uint8Array): number[] {
  const z = zipLayout(b);
  if (!z) return [0, b.length];
  const out = [0, z.cdOffset, z.eocd, z.eocd + 10, z.eocd + 22, b.length];
  for (const e of z.entries) out.push(e.local, e.local + 30, e.dataStart, e.dataStart + e.size, e.central, e.central + 46);
  return [...new Set(out)].filter((x) => x >= 0 && x <= b.length).sort((a, c) => a - c);
}

/** Entry names a hostile archive carries: traversal, absolute, Windows, control characters, over-long, dot parts, empty. */
export const HOSTILE_NAMES: readonly string[] = ['../evil.txt', '../../../../tmp/rmas-fuzz-escape', '/tmp/rmas-fuzz-abs', 'a/../../b',
  '..\\..\\evil.txt', 'C:\\evil.txt', 'C:/evil.txt', 'a\\b', 'a\u0000b', './a', 'a//b', '', '/', 'a/', '.', '..', 'x'.repeat(300),
  `${'d/'.repeat(600)}f`, 'bundle.json', 'a\nb', '\u202eexe.pt', 'CON', 'data.pkl/x', 'archive/data.pkl/../../x'];

/**
 * One structural mutation of a zip given as entries: a hostile or duplicated name, a file and a folder of one name,
 * an entry dropped, reordered or emptied. `write` makes the archive (writeZip with the reader's own options).
 */
export function mutateZipEntries(rng: Rng, entries: [string, Uint8Array][]): [string, Uint8Array][] {
  const e = entries.map(([n, d]) => [n, d] as [string, Uint8Array]);
  if (!e.length) return [[pick(rng, HOSTILE_NAMES), new Uint8Array(1)]];
  const i = rng.int(e.length);
  switch (rng.int(7)) {
    case 0: e[i]![0] = pick(rng, HOSTILE_NAMES); break;
    case 1: e[i]![0] = `${e[i]![0].slice(0, e[i]![0].lastIndexOf('/') + 1)}${pick(rng, HOSTILE_NAMES)}`; break;
    case 2: e.splice(rng.int(e.length + 1), 0, [e[rng.int(e.length)]![0], pick(rng, [new Uint8Array(0), e[i]![1]])]); break; // duplicate
    case 3: e.push([`${e[i]![0]}/${pick(rng, ['x', 'data.pkl', 'adapter.pt'])}`, new Uint8Array(3)]); break; // file and folder
    case 4: e.splice(i, 1); break;
    case 5: e.reverse(); break;
    default: e[i]![1] = pick(rng, [new Uint8Array(0), e[i]![1].subarray(0, e[i]![1].length >> 1), concat(e[i]![1], e[i]![1])]);
  }
  return e;
}

/**
 * One mutation of a zip's bytes at its fields: sizes that disagree with the data, offsets past the end or onto
 * another entry, a compression method, a name length, entry counts, zip64 markers, CRCs, a cut at a boundary.
 */
export function mutateZipBytes(rng: Rng, input: Uint8Array): Uint8Array {
  const z = zipLayout(input);
  if (!z || !z.entries.length) return mutateBytes(rng, input);
  const b = input.slice();
  const e = pick(rng, z.entries);
  const big = () => pick(rng, interesting(b.length));
  switch (rng.int(11)) {
    case 0: putUint(b, e.central + 24, 4, big()); break; // compressed size
    case 1: putUint(b, e.central + 20, 4, big()); putUint(b, e.central + 24, 4, big()); break; // both sizes
    case 2: putUint(b, e.central + 42, 4, pick(rng, [big(), BigInt(pick(rng, z.entries).local), BigInt(z.cdOffset)])); break; // local
    case 3: putUint(b, e.central + 10, 2, pick(rng, [8n, 12n, 99n, 0xffffn])); break; // compressed
    case 4: putUint(b, e.central + 28, 2, pick(rng, [0n, 0xffffn, BigInt(e.nameBytes + 1)])); break; // name length
    case 5: putUint(b, e.central + 30, 2, pick(rng, [4n, 0xffffn, 12n])); break; // extra length
    case 6: putUint(b, z.eocd + 10, 2, pick(rng, [0n, 0xffffn, BigInt(z.entries.length + 1)])); putUint(b, z.eocd + 8, 2, 0xffffn); break;
    case 7: putUint(b, z.eocd + 16, 4, pick(rng, [big(), 0xffffffffn, BigInt(e.local)])); break; // central directory offset
    case 8: putUint(b, e.central + 16, 4, big()); break; // CRC
    case 9: putUint(b, e.local + 26, 2, big()); break; // the local header's name length
    default: return truncateNear(rng, input, pick(rng, zipBoundaries(input)));
  }
  return b;
}

// ------------------------------------------------------------------------------------------ pickle

/** Argument sizes of the pickle opcodes (protocol 0-5); 'line' = up to a newline, 'u32'/'u8'/'u64' = length-prefixed. */
const PICKLE_ARGS: Record<number, number | 'line' | 'line2' | 'u8' | 'u32' | 'u64'> = {
  0x80: 1, 0x95: 8, 0x2e: 0, 0x28: 0, 0x7d: 0, 0x5d: 0, 0x29: 0, 0x58: 'u32', 0x8c: 'u8', 0x71: 1, 0x72: 4, 0x94: 0, 0x68: 1,
  0x6a: 4, 0x4a: 4, 0x4b: 1, 0x4d: 2, 0x8a: 'u8', 0x8b: 'u32', 0x47: 8, 0x74: 0, 0x85: 0, 0x86: 0, 0x87: 0, 0x73: 0, 0x75: 0,
  0x61: 0, 0x65: 0, 0x89: 0, 0x88: 0, 0x4e: 0, 0x51: 0, 0x63: 'line2', 0x93: 0, 0x52: 0, 0x62: 0, 0x69: 'line2', 0x6f: 0,
  0x81: 0, 0x92: 0, 0x50: 'line', 0x82: 1, 0x83: 2, 0x84: 4, 0x49: 'line', 0x4c: 'line', 0x53: 'line', 0x56: 'line',
  0x46: 'line', 0x42: 'u32', 0x43: 'u8', 0x54: 'u32', 0x55: 'u8', 0x8f: 0, 0x90: 0, 0x91: 0, 0x96: 'u64', 0x97: 0, 0x98: 0,
  0x8e: 'u64', 0x8d: 'u64', 0x67: 'line', 0x70: 'line', 0x64: 0, 0x6c: 0, 0x30: 0, 0x31: 0, 0x32: 0,
};
export const PICKLE_OPCODES = Object.keys(PICKLE_ARGS).map(Number);

export interface PickleOp { at: number; op: number; end: number }

/** The opcodes of a pickle up to STOP (or to where it stops making sense). */
export function pickleOps(p: Uint8Array): PickleOp[] {
  const out: PickleOp[] = [];
  for (let at = 0; at < p.length;) {
    const op = p[at]!;
    const a = PICKLE_ARGS[op];
    if (a === undefined) break;
    let end = at + 1;
    if (typeof a === 'number') end += a;
    else if (a === 'u8') end += 1 + (p[at + 1] ?? 0);
    else if (a === 'u32') end += 4 + Number(getUint(p, at + 1, 4));
    else if (a === 'u64') end += 8 + Number(getUint(p, at + 1, 8));
    else {
      for (let k = a === 'line2' ? 2 : 1; k > 0; k--) {
        const nl = p.indexOf(0x0a, end);
        end = nl < 0 ? p.length : nl + 1;
      }
    }
    out.push({ at, op, end: Math.min(end, p.length) });
    if (op === 0x2e) break;
    at = end;
  }
  return out;
}

/** Globals that would run code (or that a state dict never needs): pickle's classic payloads and torch's own. */
export const EVIL_GLOBALS: readonly [string, string][] = [['os', 'system'], ['posix', 'system'], ['builtins', 'eval'],
  ['builtins', 'exec'], ['__builtin__', 'eval'], ['subprocess', 'Popen'], ['builtins', 'getattr'], ['torch', 'load'],
  ['torch.serialization', 'load'], ['numpy.core.multiarray', '_reconstruct'], ['collections', 'defaultdict'],
  ['torch._utils', '_rebuild_tensor'], ['builtins', '__import__'], ['nt', 'system'], ['', ''], ['torch', 'FloatStorage.x']];
/** Globals a state dict does need, to swap among themselves. */
export const ALLOWED_GLOBALS: readonly [string, string][] = [['collections', 'OrderedDict'], ['torch._utils', '_rebuild_tensor_v2'],
  ['torch._utils', '_rebuild_parameter'], ['torch', 'FloatStorage'], ['torch', 'HalfStorage'], ['torch', 'BFloat16Storage']];

const globalOp = ([m, n]: readonly [string, string]) => utf8.encode(`c${m}\n${n}\n`);
const unicodeOp = (s: string) => {
  const b = utf8.encode(s);
  const h = new Uint8Array(5);
  h[0] = 0x58;
  putUint(h, 1, 4, BigInt(b.length));
  return concat(h, b);
};
/** Classic payloads: GLOBAL + args + REDUCE, the same through STACK_GLOBAL, INST, OBJ, NEWOBJ, BUILD and EXT1. */
export function evilPayload(rng: Rng): Uint8Array {
  const [m, n] = pick(rng, EVIL_GLOBALS);
  const arg = concat(Uint8Array.of(0x28), unicodeOp('touch /tmp/rmas-fuzz-pwned'), Uint8Array.of(0x74)); // (V...t
  switch (rng.int(7)) {
    case 0: return concat(globalOp([m, n]), arg, Uint8Array.of(0x52)); // c..\n..\n ( .. t R
    case 1: return concat(unicodeOp(m), unicodeOp(n), Uint8Array.of(0x93), arg, Uint8Array.of(0x52)); // STACK_GLOBAL
    case 2: return concat(Uint8Array.of(0x28), unicodeOp('id'), utf8.encode(`i${m}\n${n}\n`)); // INST
    case 3: return concat(Uint8Array.of(0x28), globalOp([m, n]), unicodeOp('id'), Uint8Array.of(0x6f)); // OBJ
    case 4: return concat(globalOp([m, n]), Uint8Array.of(0x29, 0x81)); // NEWOBJ
    case 5: return Uint8Array.of(0x82, rng.int(256)); // EXT1: a registry entry, i.e. any global
    default: return concat(globalOp(pick(rng, ALLOWED_GLOBALS)), Uint8Array.of(0x29, 0x52, 0x7d, 0x62)); // BUILD with a dict state
  }
}

/**
 * One mutation of a pickle: a global swapped (for an evil one or another allowed one), an opcode replaced,
 * deleted or repeated, a payload inserted at an opcode boundary, an integer argument pushed to an edge value,
 * a length prefix pushed past the end, or the pickle cut at an opcode boundary.
 */
export function mutatePickle(rng: Rng, pkl: Uint8Array): Uint8Array {
  const ops = pickleOps(pkl);
  if (!ops.length) return mutateBytes(rng, pkl);
  const o = pick(rng, ops);
  const globals = ops.filter((x) => x.op === 0x63);
  const ints = ops.filter((x) => x.op === 0x4b || x.op === 0x4d || x.op === 0x4a || x.op === 0x8a);
  const lens = ops.filter((x) => x.op === 0x58 || x.op === 0x8c || x.op === 0x71 || x.op === 0x72 || x.op === 0x68 || x.op === 0x6a);
  const splice = (at: number, end: number, ins: Uint8Array) => concat(pkl.subarray(0, at), ins, pkl.subarray(end));
  switch (rng.int(10)) {
    case 0: case 1: {
      const g = globals.length ? pick(rng, globals) : o;
      return splice(g.at, g.op === 0x63 ? g.end : g.at, globalOp(pick(rng, rng.int(3) ? EVIL_GLOBALS : ALLOWED_GLOBALS)));
    }
    case 2: return splice(o.at, o.at + 1, Uint8Array.of(pick(rng, [...PICKLE_OPCODES, 0x00, 0xff, 0x99]))); // opcode swapped
    case 3: return splice(o.at, o.end, new Uint8Array(0)); // opcode deleted
    case 4: return splice(o.at, o.at, pkl.subarray(o.at, o.end)); // opcode repeated
    case 5: return splice(o.at, o.at, evilPayload(rng));
    case 6: if (ints.length) { // sizes, strides, offsets, storage numels pushed to edge values
      const x = pick(rng, ints);
      const v = pick(rng, [0n, 1n, 0xffn, 0xffffn, 0x7fffffffn, 2n ** 53n, 2n ** 63n - 1n, 10n ** 12n]);
      const l = new Uint8Array(10);
      l[0] = 0x8a; l[1] = 8; putUint(l, 2, 8, v);
      return splice(x.at, x.end, rng.int(2) ? l : Uint8Array.of(0x4a, 0xff, 0xff, 0xff, 0xff));
    } return mutateBytes(rng, pkl);
    case 7: if (lens.length) { // a length or memo index pushed around
      const x = pick(rng, lens);
      const b = pkl.slice();
      const w = x.op === 0x58 || x.op === 0x72 || x.op === 0x6a ? 4 : 1;
      putUint(b, x.at + 1, w, pick(rng, interesting(pkl.length)));
      return b;
    } return mutateBytes(rng, pkl);
    case 8: return pkl.slice(0, pick(rng, ops).end - rng.int(2)); // cut at (or just before) an opcode boundary
    default: return mutateBytes(rng, pkl);
  }
}

/**
 * The globals a pickle names, in order: GLOBAL/INST lines, and STACK_GLOBAL of the two strings pushed before it
 * (followed through the memo). An independent reading for the property "a pickle that loads names only allowed globals".
 */
export function pickleGlobals(pkl: Uint8Array): string[] {
  const out: string[] = [];
  const strs: unknown[] = [];
  const memo = new Map<number, unknown>();
  for (const { at, op, end } of pickleOps(pkl)) {
    const body = pkl.subarray(at + 1, end);
    if (op === 0x63 || op === 0x69) {
      const [m, n] = text(body).split('\n');
      out.push(`${m}.${n}`);
    } else if (op === 0x58) strs.push(text(body.subarray(4)));
    else if (op === 0x8c) strs.push(text(body.subarray(1)));
    else if (op === 0x71 || op === 0x72 || op === 0x94) memo.set(op === 0x94 ? memo.size : Number(getUint(body, 0, op === 0x71 ? 1 : 4)),
      strs[strs.length - 1]);
    else if (op === 0x68 || op === 0x6a) strs.push(memo.get(Number(getUint(body, 0, op === 0x68 ? 1 : 4))));
    else if (op === 0x93) out.push(`${String(strs[strs.length - 2])}.${String(strs[strs.length - 1])}`);
    else if (op === 0x82 || op === 0x83 || op === 0x84) out.push(`<extension ${Number(getUint(body, 0, body.length))}>`);
  }
  return out;
}

// -------------------------------------------------------------------------------------------- GGUF

export interface GgufField {
  at: number;
  width: number;
  what: 'count' | 'strlen' | 'type' | 'arrlen' | 'ndims' | 'dim' | 'offset' | 'value';
}

/** The integer fields of a GGUF v2/v3 header written by gguf-writer (counts, string and array lengths, types, dims, offsets). */
export function ggufFields(b: Uint8Array): { fields: GgufField[]; headerEnd: number } {
  const fields: GgufField[] = [{ at: 8, width: 8, what: 'count' }, { at: 16, width: 8, what: 'count' }];
  const tensors = Number(getUint(b, 8, 8));
  const kvs = Number(getUint(b, 16, 8));
  let p = 24;
  const str = () => { fields.push({ at: p, width: 8, what: 'strlen' }); p += 8 + Number(getUint(b, p, 8)); };
  const SIZES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const value = (type: number): void => {
    if (type === 8) return str();
    if (type === 9) {
      const sub = Number(getUint(b, p, 4));
      fields.push({ at: p, width: 4, what: 'type' }, { at: p + 4, width: 8, what: 'arrlen' });
      const n = Number(getUint(b, p + 4, 8));
      p += 12;
      for (let i = 0; i < n && p < b.length && fields.length < 100_000; i++) value(sub);
      return;
    }
    if (SIZES[type]) fields.push({ at: p, width: SIZES[type]!, what: 'value' });
    p += SIZES[type] ?? b.length; // an unknown type: nothing after it can be found
  };
  for (let i = 0; i < kvs && p < b.length && fields.length < 100_000; i++) {
    str();
    fields.push({ at: p, width: 4, what: 'type' });
    const type = Number(getUint(b, p, 4));
    p += 4;
    value(type);
  }
  for (let i = 0; i < tensors && p < b.length && fields.length < 100_000; i++) {
    str();
    const nd = Number(getUint(b, p, 4));
    fields.push({ at: p, width: 4, what: 'ndims' });
    p += 4;
    for (let d = 0; d < nd && p < b.length; d++) (fields.push({ at: p, width: 8, what: 'dim' }), (p += 8));
    fields.push({ at: p, width: 4, what: 'type' }, { at: p + 4, width: 8, what: 'offset' });
    p += 12;
  }
  return { fields: fields.filter((f) => f.at + f.width <= b.length), headerEnd: p };
}

/** Every field start and end of a GGUF header, and the header's end. */
export function ggufBoundaries(b: Uint8Array): number[] {
  const { fields, headerEnd } = ggufFields(b);
  return [...new Set([0, 4, 8, ...fields.flatMap((f) => [f.at, f.at + f.width]), headerEnd, b.length])].sort((x, y) => x - y);
}

/** One mutation of a GGUF file's header fields: counts, lengths, dims and offsets pushed past the end or huge; types swapped. */
export function mutateGguf(rng: Rng, input: Uint8Array): Uint8Array {
  const { fields } = ggufFields(input);
  if (!fields.length || rng.int(6) === 0) return mutateBytes(rng, input);
  const b = input.slice();
  // half the time a field that is not a string length: model files hold thousands of token strings
  const other = fields.filter((x) => x.what !== 'strlen');
  const f = pick(rng, rng.int(2) && other.length ? other : fields);
  let v: bigint;
  if (f.what === 'type') v = BigInt(pick(rng, [0, 1, 2, 3, 6, 8, 9, 10, 12, 13, 14, 15, 24, 30, 31, 99, 0xffffffff]));
  else if (f.what === 'ndims') v = BigInt(pick(rng, [0, 1, 3, 4, 8, 9, 0xffffffff]));
  else if (f.what === 'dim') v = pick(rng, [0n, 1n, 3n, 31n, 33n, 255n, 257n, 2n ** 32n, 2n ** 32n + 1n, 2n ** 40n, 2n ** 63n]);
  else if (f.what === 'offset') v = pick(rng, [0n, 1n, 16n, 32n, 64n, 96n, BigInt(b.length), 2n ** 40n, 2n ** 64n - 32n]);
  else if (f.what === 'value') { // sizes and ids at their edges; as f32, infinity and a NaN
    v = pick(rng, [0n, 1n, 2n, 3n, 7n, 255n, 0x7fffffffn, 0x80000000n, 0xffffffffn, 2n ** 40n, 0x7f800000n, 0xff800001n]);
  }
  else v = pick(rng, interesting(b.length));
  putUint(b, f.at, f.width, v);
  if (f.what === 'type' && chance(rng, 0.3)) putUint(b, 4, 4, pick(rng, [1n, 2n, 4n, 0x03000000n])); // the version too
  return b;
}
