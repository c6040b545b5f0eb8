/**
 * planSystem on the offline tiny system served from disk by a fetch that honours HTTP Range (what the hub and
 * the app's server do): the files and sizes it lists match the disk, only headers of the weights are read,
 * no events, and a binding limit smaller than a row is refused naming the tensor. The offline system is the
 * committed tiny_distillation (models/tiny/distillation), served from the repository.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/tensor/cpu';
import { callRegistry } from '../workers/calls';
import { systemCalls } from '../workers/system-calls';
import type { SystemSpec } from '../workers/protocol';
import { buildTinySystem } from '../scripts/tiny-system/tiny-mas';
import { loadSystemFromSpec } from '../src/mas/system-urls';
import { memoryKv } from '../src/store/kv';
import { isMissingFile, modelCache } from '../src/store/models';

const root = 'http://app.test/';
const tmp = mkdtempSync(join(tmpdir(), 'plan-system-'));
const DIST = 'dist/';
beforeAll(async () => {
  await buildTinySystem('distillation', join(tmp, 'dist'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const SYSTEM = 'models/tiny/distillation/';
/** A path of the app (repository-relative) on disk: the built distillation folders from tmp, the rest from the repository. */
const diskOf = (rel: string) => (rel.startsWith(DIST) ? join(tmp, rel) : join(resolve('.'), rel));
const pathOf = (url: string) => diskOf(decodeURIComponent(url.slice(root.length)));
const read = (url: string) => {
  try {
    return url.startsWith(root) ? new Uint8Array(readFileSync(pathOf(url))) : null;
  } catch {
    return null;
  }
};
/** Every request: its URL and the bytes sent back. */
const served: { url: string; range: string | null; bytes: number }[] = [];
const planFetch: typeof fetch = async (input, init) => {
  const url = String(input);
  const range = new Headers(init?.headers).get('range');
  const b = read(url);
  if (!b) return new Response(null, { status: 404 });
  const m = /^bytes=(\d+)-(\d*)$/.exec(range ?? '');
  const [a, z] = m ? [Number(m[1]), Math.min(m[2] ? Number(m[2]) : b.length - 1, b.length - 1)] : [0, b.length - 1];
  const body = b.slice(a, z + 1);
  served.push({ url, range, bytes: body.length });
  return new Response(body, {
    status: m ? 206 : 200,
    headers: { 'content-length': String(body.length), ...(m ? { 'content-range': `bytes ${a}-${z}/${b.length}` } : {}) },
  });
};
let fileCalls = 0;
const fetchFile = async (url: string) => {
  fileCalls++;
  return read(url);
};
const cpu = new CpuBackend('f32');
const deps = { backend: async () => ({ backend: cpu }), appBase: root, fetchFile, planFetch };

const TINY = ['expert', 'learner'];
const LINKS = [...TINY.map((r) => `${SYSTEM}${r}/adapter.pt`), ...['outer_el', 'outer_le'].map((n) => `${SYSTEM}outer/${n}.pt`)];
/** The files of the tiny system, listed independently of the planner (repository-relative). */
const expectedFiles = () =>
  [
    `${SYSTEM}prompts.json`,
    ...TINY.flatMap((m) =>
      [
        'config.json',
        'model.safetensors',
        'tokenizer.json',
        'tokenizer_config.json',
        'chat_template.jinja',
        'chat_template.json',
        'generation_config.json',
      ].map((f) => `${SYSTEM}${m}/${f}`),
    ),
    ...LINKS,
  ].filter((p) => {
    try {
      return statSync(diskOf(p)).isFile();
    } catch {
      return false;
    }
  });

describe('planSystem (offline tiny system, Range reads)', () => {
  it('lists every file with its size on disk, reads only the safetensors headers, and fits', async () => {
    const api = systemCalls(deps, callRegistry());
    const spec = (await api.offlineSystem()) as SystemSpec;
    served.length = 0;
    fileCalls = 0;
    const r = await api.planSystem(spec);
    const expected = expectedFiles();
    expect(fileCalls).toBe(0); // the whole-file hook (the model cache in the worker) is not used
    expect(r.files.map((f) => f.url.slice(root.length)).sort()).toEqual([...expected].sort());
    for (const f of r.files) expect(f.bytes).toBe(statSync(pathOf(f.url)).size);
    const total = expected.reduce((a, p) => a + statSync(diskOf(p)).size, 0);
    // prompts.json; five files per role and chat_template.jinja for the llama learner (no chat_template.json); 4 links
    expect(expected.length).toBe(1 + 2 * 5 + 1 + 4);
    expect(r.plan.totalBytes).toBe(total);
    expect(r.plan.fetchBytes).toBe(total);
    expect(r.plan.cachedBytes).toBe(0);
    expect(r.refusal).toBeNull();
    // MiB with 3 decimals under 1 MiB, else 1 (src/store/plan.ts)
    const mib = (n: number) => (n / 2 ** 20).toFixed(n < 2 ** 20 ? 3 : 1);
    expect(r.text).toBe(`fetch ${mib(total)} MiB, GPU memory ≈ ${mib(r.plan.gpuBytes)} MiB`);
    let weights = 0;
    for (const m of TINY) {
      const url = `${root}${SYSTEM}${m}/model.safetensors`;
      const disk = readFileSync(diskOf(`${SYSTEM}${m}/model.safetensors`));
      const headerLen = Number(new DataView(disk.buffer, disk.byteOffset, 8).getBigUint64(0, true));
      weights += disk.length - 8 - headerLen;
      const reads = served.filter((s) => s.url === url);
      expect(reads.every((s) => s.range !== null)).toBe(true);
      expect(reads.reduce((a, s) => a + s.bytes, 0)).toBe(1 + 8 + headerLen); // size probe, length field, header
      expect(1 + 8 + headerLen).toBeLessThan(disk.length / 10);
    }
    expect(r.plan.models.map((m) => m.weights).reduce((a, b) => a + b)).toBe(weights);
    expect(r.plan.gpuBytes).toBeGreaterThan(weights);
    api.dispose();
  });

  it('counts cached URLs, and refuses where one row of a tensor exceeds the binding limit', async () => {
    const limits = { maxStorageBufferBindingSize: 64, maxBufferSize: 1 << 30, features: [] };
    const cachedUrl = `${root}${SYSTEM}learner/model.safetensors`;
    const api = systemCalls({ ...deps, planLimits: async () => limits, cachedUrls: async () => [cachedUrl] }, callRegistry());
    const spec = (await api.offlineSystem()) as SystemSpec;
    const r = await api.planSystem(spec, { backend: 'webgpu' });
    expect(r.plan.cachedBytes).toBe(statSync(diskOf(`${SYSTEM}learner/model.safetensors`)).size);
    expect(r.plan.fetchBytes + r.plan.cachedBytes).toBe(r.plan.totalBytes);
    // the expert (qwen3, hidden 64) is model 1; its embedding row is 64 values of the saved dtype, more than 64 bytes
    expect(r.refusal).toMatch(
      /^model 1: one row of "model\.embed_tokens\.weight" \((f32|bf16|f16), \d+ bytes\) is larger than this adapter's 64-byte storage-binding limit/,
    );
    expect(r.text).toContain(`; cannot run here: ${r.refusal}`);
    // on the CPU backend the same system fits
    expect((await api.planSystem(spec, { backend: 'cpu' })).refusal).toBeNull();
    api.dispose();
  });
});

describe('a Qwen3.5 (image-text) role: its vision tower and mtp.* tensors', () => {
  // distillation's tiny system: expert qwen3_5-tiny, learner qwen3_5-tied-tiny, both with model.visual.* and mtp.* stand-ins
  const spec: SystemSpec = {
    style: 'distillation',
    roles: { expert: { model: `${root}${DIST}distillation-expert/` }, learner: { model: `${root}${DIST}distillation-learner/` } },
    outerRepo: `${root}${DIST}distillation-outerlinks/`,
  };
  /** The file's header length and the data byte ranges of the tensors the engine reads and of those it never reads. */
  const layoutOf = (rel: string) => {
    const disk = readFileSync(diskOf(rel));
    const n = Number(new DataView(disk.buffer, disk.byteOffset, 8).getBigUint64(0, true));
    const header = JSON.parse(new TextDecoder().decode(disk.subarray(8, 8 + n))) as Record<string, { data_offsets: [number, number] }>;
    const spans = Object.entries(header)
      .filter(([k]) => k !== '__metadata__')
      .map(([k, v]) => ({
        unread: k.startsWith('model.visual.') || k.startsWith('mtp.'),
        a: 8 + n + v.data_offsets[0],
        b: 8 + n + v.data_offsets[1],
      }));
    return { headerEnd: 8 + n, spans, size: disk.length };
  };
  const model = (role: string) => `${DIST}distillation-${role}/model.safetensors`;

  it('the download plan counts the header and the decoder tensors only', async () => {
    const api = systemCalls(deps, callRegistry());
    const r = await api.planSystem(spec);
    for (const role of ['expert', 'learner']) {
      const l = layoutOf(model(role));
      const read = l.spans.filter((s) => !s.unread).reduce((a, s) => a + s.b - s.a, 0);
      const unread = l.spans.filter((s) => s.unread).reduce((a, s) => a + s.b - s.a, 0);
      expect(unread).toBeGreaterThan(10_000);
      expect(r.files.find((f) => f.url === `${root}${model(role)}`)!.bytes).toBe(l.headerEnd + read);
      expect(l.headerEnd + read + unread).toBe(l.size);
    }
    api.dispose();
  });

  it('loaded through the model cache read in place, no chunk that lies wholly in them is downloaded', async () => {
    const kv = memoryKv();
    const cache = modelCache({ kv, fetch: planFetch, chunkBytes: 512 });
    // as the engine worker's: a file the server does not have is null (→ 404)
    const fetchRange = async (url: string, a: number, b: number) => {
      try {
        const src = await cache.ranged(url);
        const total = await src.size();
        const to = Math.min(b + 1, total);
        return { bytes: await src.read(a, to - a), total };
      } catch (e) {
        if (isMissingFile(e)) return null;
        throw e;
      }
    };
    const system = await loadSystemFromSpec(spec, cpu, { fetchFile, fetchRange });
    try {
      for (const role of ['expert', 'learner']) {
        const url = `${root}${model(role)}`;
        const l = layoutOf(model(role));
        const stored = [...kv.map.keys()].filter((k) => k.startsWith(`c|${url}|`)).map((k) => Number(k.split('|').at(-1)));
        const inside = (i: number) => l.spans.some((s) => s.unread && s.a <= i * 512 && Math.min((i + 1) * 512, l.size) <= s.b);
        const never = Array.from({ length: Math.ceil(l.size / 512) }, (_, i) => i).filter(inside);
        expect(never.length, role).toBeGreaterThan(10);
        expect(stored.filter(inside), role).toEqual([]);
        // the header's and every decoder tensor's chunks are there
        const touches = (i: number, a: number, b: number) => a < (i + 1) * 512 && i * 512 < b;
        const needed = Array.from({ length: Math.ceil(l.size / 512) }, (_, i) => i)
          .filter((i) => touches(i, 0, l.headerEnd) || l.spans.some((s) => !s.unread && s.b > s.a && touches(i, s.a, s.b)));
        expect(needed.filter((i) => !stored.includes(i)), role).toEqual([]);
      }
      expect(system.agents.get('expert')!.decoder.config.family).toBe('qwen3_5');
    } finally {
      system.dispose();
    }
  });
});
