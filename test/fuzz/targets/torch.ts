/**
 * Fuzz target: PyTorch `.pt` state dicts (readTorchStateDict: the zip, then the pickle machine). Besides the
 * harness's property, a file that loads must name only allowlisted globals in its pickle (read independently of
 * the reader, by pickleGlobals), and the worker's guards see that nothing is spawned, loaded or compiled.
 */
import { readTorchStateDict, writeTorchStateDict } from '../../../src/formats/torch';
import { readZip, writeZip } from '../../../src/formats/zip';
import type { Rng } from '../../../src/util/rng';
import type { FuzzTarget } from '../harness';
import {
  ALLOWED_GLOBALS, mutateBytes, mutatePickle, mutateZipBytes, mutateZipEntries, pickleGlobals, pickleOps, zipBoundaries,
} from '../mutate';
import { bytesKey, cutsAt, expectThat, fnv, repoFile } from './common';

const ALLOWED = new Set(ALLOWED_GLOBALS.map(([m, n]) => `${m}.${n}`));
const ELEM = { f32: 4, f16: 2, bf16: 2 } as const;

/** torch 1.13's files (the fixtures), ours, and an upstream-layout link of the tiny system. */
function seeds(): Uint8Array[] {
  const ours = writeTorchStateDict(new Map([
    ['w', { dtype: 'bf16', shape: [2, 3], bytes: Uint8Array.from({ length: 12 }, (_, i) => i * 9) }],
    ['s', { dtype: 'f32', shape: [], bytes: new Uint8Array(new Float32Array([0.25]).buffer) }],
    ['e', { dtype: 'f16', shape: [0, 4], bytes: new Uint8Array(0) }],
  ] as const));
  return [repoFile('src/formats/fixtures/torch_small.pt'), repoFile('src/formats/fixtures/torch_ours.pt'), ours,
    repoFile('models/tiny/system/planner/adapter.pt')];
}

const entriesOf = (b: Uint8Array): [string, Uint8Array][] | null => {
  try {
    return [...readZip(b, 'seed')].map(([n, d]) => [n, d.slice()]);
  } catch {
    return null;
  }
};
const rezip = (e: readonly (readonly [string, Uint8Array])[]) => writeZip(e, { align: 64 });

/** The pickle of a torch zip (the entry `<archive>/data.pkl`), or null. */
const pklOf = (e: [string, Uint8Array][]) => e.find(([n]) => /^[^/]+\/data\.pkl$/.test(n));

/** A pickle mutation (half the time), a zip entry mutation, a zip field mutation, or a byte mutation. */
export function mutateTorch(rng: Rng, b: Uint8Array): Uint8Array {
  const e = entriesOf(b);
  const k = rng.int(10);
  if (e && k < 5) {
    const p = pklOf(e);
    if (p) p[1] = mutatePickle(rng, p[1]);
    return rezip(e);
  }
  if (e && k < 7) return rezip(mutateZipEntries(rng, e));
  return k < 9 ? mutateZipBytes(rng, b) : mutateBytes(rng, b);
}

/** Cuts of the zip at its boundaries, and of the pickle at each opcode boundary (re-zipped, so that only the pickle ends early). */
export function torchCuts(b: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = cutsAt(b, zipBoundaries(b));
  const e = entriesOf(b);
  const p = e && pklOf(e);
  if (e && p) {
    const ops = pickleOps(p[1]);
    const step = Math.max(1, Math.ceil(ops.length / 60));
    for (let i = 0; i < ops.length; i += step) {
      out.push(rezip(e.map(([n, d]): [string, Uint8Array] => [n, d === p[1] ? d.slice(0, ops[i]!.at) : d])));
    }
  }
  return out;
}

export const torch: FuzzTarget<Uint8Array> = {
  name: 'torch-pt',
  seeds,
  truncations: torchCuts,
  mutate: mutateTorch,
  labels: () => ['fuzz.pt'],
  size: (b) => b.length,
  key: bytesKey,
  run: (b) => {
    const sd = readTorchStateDict(b, 'fuzz.pt');
    const names = pickleGlobals(pklOf(entriesOf(b)!)![1]);
    const foreign = names.filter((n) => !ALLOWED.has(n));
    expectThat(foreign.length === 0, `a pickle naming ${foreign.join(', ')} loaded`);
    const parts: string[] = [];
    for (const [k, t] of sd) {
      const numel = t.shape.reduce((a, c) => a * c, 1);
      expectThat(t.bytes.length === numel * ELEM[t.dtype], `tensor ${k}: ${t.bytes.length} bytes for ${t.dtype} [${t.shape}]`);
      parts.push(`${k}:${t.dtype}[${t.shape}]:${fnv(t.bytes)}`);
    }
    return parts.join(',');
  },
  files: (b) => ({ 'fuzz.pt': b }),
};
