/** Helpers the fuzz targets share: digests and keys of inputs, multi-file inputs, the repository's fixtures. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Rng } from '../../../src/util/rng';
import { type FuzzTarget, PropertyViolation } from '../harness';
import { mutateBytes, mutateJsonText, pick, truncateNear } from '../mutate';

export const ROOT = resolve(import.meta.dirname, '../../..');
export const repoFile = (path: string) => new Uint8Array(readFileSync(resolve(ROOT, path)));
export const enc = (s: string) => new TextEncoder().encode(s);

/** FNV-1a over bytes, as 8 hex digits. */
export function fnv(b: Uint8Array): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i]!, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

export const bytesKey = (b: Uint8Array) => `${b.length}:${fnv(b)}`;

/** A set of named files (a model folder, a sharded checkpoint), the input of multi-file targets. */
export type Files = Record<string, Uint8Array>;
export const filesKey = (f: Files) => Object.keys(f).sort().map((n) => `${n}=${bytesKey(f[n]!)}`).join(';');
export const filesSize = (f: Files) => Object.values(f).reduce((n, b) => n + b.length, 0);

/** Throws PropertyViolation unless `ok`. */
export function expectThat(ok: boolean, what: string): void {
  if (!ok) throw new PropertyViolation(what);
}

/** Offsets of the JSON tokens of `b` (structural characters), at most `max` of them spread evenly, and the ends. */
export function jsonBoundaries(b: Uint8Array, max = 120): number[] {
  const out = [0, b.length - 1];
  for (let i = 0; i < b.length; i++) if ('{}[]:,"'.includes(String.fromCharCode(b[i]!))) out.push(i, i + 1);
  const all = [...new Set(out)].sort((x, y) => x - y);
  if (all.length <= max) return all;
  return Array.from({ length: max }, (_, k) => all[Math.floor((k * all.length) / max)]!);
}

export const cutsAt = (b: Uint8Array, at: readonly number[]) => at.filter((x) => x < b.length).map((x) => b.slice(0, x));

/**
 * A target over one JSON file read as `label` (the path its errors must name): cut at up to `cuts` of its JSON
 * tokens, mutated as JSON text, served to the run as a file of the label's base name.
 */
export function jsonFileTarget(o: { name: string; label: string; cuts: number; seeds: () => Uint8Array[]; run: (b: Uint8Array) => string },
): FuzzTarget<Uint8Array> {
  return {
    name: o.name,
    seeds: o.seeds,
    truncations: (b) => cutsAt(b, jsonBoundaries(b, o.cuts)),
    mutate: mutateJsonText,
    labels: () => [o.label],
    size: (b) => b.length,
    key: bytesKey,
    run: o.run,
    files: (b) => ({ [o.label.slice(o.label.lastIndexOf('/') + 1)]: b }),
  };
}

/** One mutation of one file of a set: JSON files get JSON mutations, others `other`; sometimes a file goes missing. */
export function mutateOneFile(rng: Rng, files: Files, other: (rng: Rng, b: Uint8Array, name: string) => Uint8Array = mutateBytes): Files {
  const out = { ...files };
  const names = Object.keys(out);
  const n = pick(rng, names);
  if (rng.int(12) === 0 && names.length > 1) {
    delete out[n];
    return out;
  }
  out[n] = n.endsWith('.json') ? mutateJsonText(rng, out[n]!) : other(rng, out[n]!, n);
  return out;
}

/** Cuts of every file of a set at its boundaries (JSON tokens, or what `boundaries` says for the other files). */
export function fileCuts(files: Files, boundaries: (b: Uint8Array, name: string) => number[] = (b) => jsonBoundaries(b, 40),
  json = 40): Files[] {
  return Object.entries(files).flatMap(([n, b]) =>
    cutsAt(b, n.endsWith('.json') ? jsonBoundaries(b, json) : boundaries(b, n)).map((c) => ({ ...files, [n]: c })));
}

export { truncateNear };
