/**
 * planSystem on the offline tiny system served from disk by a fetch that honours HTTP Range (what the hub and
 * the app's server do): the files and sizes it lists match the disk, only headers of the weights are read,
 * no events, and a binding limit smaller than a row is refused naming the tensor.
 */
import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/tensor/cpu';
import { createPlaygroundApi } from '../workers/engine-api';
import type { SystemSpec } from '../workers/protocol';

const root = 'http://app.test/';
const pathOf = (url: string) => join(resolve('.'), decodeURIComponent(url.slice(root.length)));
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
  return new Response(body, { status: m ? 206 : 200, headers: { 'content-length': String(body.length), ...(m ? { 'content-range': `bytes ${a}-${z}/${b.length}` } : {}) } });
};
let fileCalls = 0;
const fetchFile = async (url: string) => {
  fileCalls++;
  return read(url);
};
const cpu = new CpuBackend('f32');
const deps = { backend: async () => ({ backend: cpu }), appBase: root, fetchFile, planFetch };

const TINY = ['qwen3-tiny', 'llama-tiny', 'qwen2-tiny'];
const LINKS = ['planner-inner', 'critic-inner', 'solver-inner', 'outer_12', 'outer_23', 'outer_31'].map((n) => `test/golden/tiny-mas/${n}.pt`);
/** The files of the tiny system, listed independently of the planner. */
const expected = [
  ...TINY.flatMap((m) => ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja', 'chat_template.json', 'generation_config.json']
    .map((f) => `models/tiny/${m}/${f}`)),
  ...LINKS,
].filter((p) => { try { return statSync(p).isFile(); } catch { return false; } });

describe('planSystem (offline tiny system, Range reads)', () => {
  it('lists every file with its size on disk, reads only the safetensors headers, and fits', async () => {
    const api = createPlaygroundApi(deps);
    const spec = (await api.offlineSystem()) as SystemSpec;
    served.length = 0;
    fileCalls = 0;
    const r = await api.planSystem(spec);
    expect(fileCalls).toBe(0); // the whole-file hook (the model cache in the worker) is not used
    expect(r.files.map((f) => f.url.slice(root.length)).sort()).toEqual([...expected].sort());
    for (const f of r.files) expect(f.bytes).toBe(statSync(pathOf(f.url)).size);
    const total = expected.reduce((a, p) => a + statSync(p).size, 0);
    expect(expected.length).toBe(3 * 6 + 6 - 2); // chat_template.jinja only for llama, no chat_template.json
    expect(r.plan.totalBytes).toBe(total);
    expect(r.plan.fetchBytes).toBe(total);
    expect(r.plan.cachedBytes).toBe(0);
    expect(r.refusal).toBeNull();
    expect(r.text).toBe(`fetch ${(total / 2 ** 20).toFixed(3)} MiB, GPU memory ≈ ${(r.plan.gpuBytes / 2 ** 20).toFixed(1)} MiB`);
    let weights = 0;
    for (const m of TINY) {
      const url = `${root}models/tiny/${m}/model.safetensors`;
      const disk = readFileSync(`models/tiny/${m}/model.safetensors`);
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
    const cachedUrl = `${root}models/tiny/qwen2-tiny/model.safetensors`;
    const api = createPlaygroundApi({ ...deps, planLimits: async () => limits, cachedUrls: async () => [cachedUrl] });
    const spec = (await api.offlineSystem()) as SystemSpec;
    const r = await api.planSystem(spec, { backend: 'webgpu' });
    expect(r.plan.cachedBytes).toBe(statSync('models/tiny/qwen2-tiny/model.safetensors').size);
    expect(r.plan.fetchBytes + r.plan.cachedBytes).toBe(r.plan.totalBytes);
    // planner (qwen3, hidden 48) is model 1; its embedding row is 48 values of the saved dtype, more than 64 bytes
    expect(r.refusal).toMatch(/^model 1: one row of "model\.embed_tokens\.weight" \((f32|bf16|f16), \d+ bytes\) is larger than this adapter's 64-byte storage-binding limit/);
    expect(r.text).toContain(`; cannot run here: ${r.refusal}`);
    // on the CPU backend the same system fits
    expect((await api.planSystem(spec, { backend: 'cpu' })).refusal).toBeNull();
    api.dispose();
  });
});
