/**
 * GGUF backbones by URL: a tiny GGUF written from models/tiny/qwen3-tiny (as convert_hf_to_gguf.py would, bf16
 * weights and f16 norms, optionally q8_0 projections) is served by a fake fetch that honours HTTP Range. The
 * decoder loaded by URL computes exactly what loadDecoderFromGguf computes on the same bytes, q8_0 passes
 * through, download progress names the file, a GGUF role needs a tokenizer folder, the planner counts the
 * file and its stored tensors, and a tiny_sequential system whose planner is the GGUF answers as the folder one.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { QK } from '../src/formats/dtype';
import { decode, encode } from '../src/formats/encode';
import { type GgufWriterTensor, ggufBlocks, writeGguf } from '../src/testing/gguf-writer';
import { SafetensorsFile, toStorage } from '../src/formats/safetensors';
import { memorySource } from '../src/formats/sources';
import { ask, type StageRecord } from '../src/mas/ask';
import { loadSystemFromSpec, progressFetch } from '../src/mas/system-urls';
import { parseDecoderConfig } from '../src/model/config';
import { Decoder } from '../src/model/decoder';
import { ggufTensorName, loadDecoderFromGguf } from '../src/model/gguf';
import { loadDecoderFromUrl, loadGgufDecoderFromUrl } from '../src/model/url';
import { ggufMetadata } from '../src/testing/model';
import { attentionLayer, weightSpecs } from '../src/model/weights';
import { planGgufModel, planSystemDownload } from '../src/store/plan';
import { CpuBackend } from '../src/tensor/cpu';
import { buildSpec, withBackbones } from '../src/ui/system';
import type { Tensor } from '../src/tensor/tensor';
import type { EngineEvent, SystemSpec } from '../workers/protocol';
import { buildTinyStandIn } from './tiny-style-standin';

const TINY = resolve('models/tiny/qwen3-tiny');
const host = 'http://hub.test';
const IDS = [3, 17, 0, 41, 8, 29, 5, 460];
const vals = (t: Tensor) => Array.from((t.backend as CpuBackend).data(t));
const tmp = mkdtempSync(join(tmpdir(), 'gguf-url-'));
const standIn = join(tmp, 'system');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The GGUF of a Hugging Face folder: bf16 weights as stored, f16 norms; q8: q8_0 projections whose rows are whole blocks. */
async function folderGguf(dir: string, q8 = false): Promise<Uint8Array> {
  const c = parseDecoderConfig(readFileSync(join(dir, 'config.json'), 'utf8'), dir);
  const st = await SafetensorsFile.fromBytes(new Uint8Array(readFileSync(join(dir, 'model.safetensors'))), dir);
  const kv = ggufMetadata(c);
  const tensors: GgufWriterTensor[] = [];
  for (const s of weightSpecs(c)) {
    const t = toStorage(await st.read(s.name), s.name);
    const v = decode(t.dtype, t.bytes, t.shape);
    const dtype = s.kind === 'norm' ? 'f16' : q8 && s.kind === 'proj' && s.shape[1] % QK === 0 ? 'q8_0' : t.dtype;
    const { type, data } = ggufBlocks(dtype, dtype === t.dtype ? t.bytes : encode(dtype, v, t.shape), t.shape);
    tensors.push({ name: ggufTensorName(s.name, c.family)!, ne: [...t.shape].reverse(), type, data });
  }
  return writeGguf(kv, tensors);
}

/** Files by URL; a fake hub: 206 for a Range, 200 otherwise, 404 elsewhere; every request is logged. */
const files = new Map<string, Uint8Array>();
const served: { url: string; range: string | null; bytes: number }[] = [];
const diskRoot = `${host}/disk`;
const rangeFetch: typeof fetch = async (input, init) => {
  const url = String(input instanceof Request ? input.url : input);
  let b = files.get(url) ?? null;
  if (!b && url.startsWith(diskRoot)) {
    try { b = new Uint8Array(readFileSync(decodeURIComponent(url.slice(diskRoot.length)))); } catch { b = null; }
  }
  if (!b) return new Response(null, { status: 404 });
  if ((init?.method ?? 'GET') === 'HEAD') return new Response(null, { status: 200, headers: { 'content-length': String(b.length) } });
  const range = new Headers(init?.headers).get('range');
  const m = /^bytes=(\d+)-(\d*)$/.exec(range ?? '');
  const [x, z] = m ? [Number(m[1]), Math.min(m[2] ? Number(m[2]) : b.length - 1, b.length - 1)] : [0, b.length - 1];
  const body = b.slice(x, z + 1);
  served.push({ url, range, bytes: body.length });
  return new Response(body, {
    status: m ? 206 : 200,
    headers: { 'content-length': String(body.length), ...(m ? { 'content-range': `bytes ${x}-${z}/${b.length}` } : {}) },
  });
};

const BF16 = `${host}/gguf/qwen3-tiny-BF16.gguf`;
const Q8 = `${host}/gguf/qwen3-tiny-Q8_0.gguf`;
beforeAll(async () => {
  files.set(BF16, await folderGguf(TINY));
  files.set(Q8, await folderGguf(TINY, true));
  await buildTinyStandIn(standIn);
});
afterEach(() => vi.unstubAllGlobals());

describe('a GGUF backbone by URL', () => {
  it('computes exactly what loadDecoderFromGguf computes on the same bytes, read by Range (each byte once)', async () => {
    const cpu = new CpuBackend('f32');
    const ref = await loadDecoderFromGguf(memorySource(files.get(BF16)!, 'x.gguf'), cpu);
    served.length = 0;
    const d = await loadDecoderFromUrl(BF16, cpu, { fetch: rangeFetch });
    expect(served.every((s) => s.url === BF16 && s.range !== null)).toBe(true);
    // the 1-byte size probe, then the file once: tensors inside the header's chunk are not fetched again
    expect(served.reduce((n, s) => n + s.bytes, 0)).toBe(files.get(BF16)!.length + 1);
    // the same through the explicit option, with a folder as base
    const e = await loadDecoderFromUrl(`${host}/elsewhere/`, cpu, { fetch: rangeFetch, gguf: BF16 });
    expect(d.config).toEqual(ref.config);
    const ids = cpu.fromValues(IDS, [IDS.length], 'i32');
    const want = vals(new Decoder(ref.config, ref.weights).forward({ inputIds: ids, logits: 'all' }).logits!);
    expect(vals(d.forward({ inputIds: ids, logits: 'all' }).logits!)).toEqual(want);
    expect(vals(e.forward({ inputIds: ids, logits: 'all' }).logits!)).toEqual(want);
    d.dispose(); e.dispose(); ref.weights.dispose();
  });

  it('a q8_0 GGUF passes through as q8_0 (the stored blocks) and computes what loadDecoderFromGguf does', async () => {
    const cpu = new CpuBackend('f32');
    const g = await loadGgufDecoderFromUrl(Q8, cpu, { fetch: rangeFetch });
    const ref = await loadDecoderFromGguf(memorySource(files.get(Q8)!, 'q8.gguf'), cpu);
    // qwen3-tiny: o_proj [48, 64] and down_proj [48, 128] have whole q8_0 rows; q/k/v/gate/up (48 columns) stay bf16
    const L = attentionLayer(g.weights.layers[0]);
    expect([L.o.dtype, L.down.dtype, L.q.dtype, L.gate.dtype]).toEqual(['q8_0', 'q8_0', 'bf16', 'bf16']);
    expect(Array.from(await cpu.readBytes(L.o))).toEqual(Array.from(await cpu.readBytes(attentionLayer(ref.weights.layers[0]).o)));
    const ids = cpu.fromValues(IDS, [IDS.length], 'i32');
    expect(vals(g.decoder.forward({ inputIds: ids, logits: 'all' }).logits!))
      .toEqual(vals(new Decoder(ref.config, ref.weights).forward({ inputIds: ids, logits: 'all' }).logits!));
    expect(g.weights.bytes.q8_0).toBe(2 * (48 * (64 + 2 * 2) + 48 * (128 + 4 * 2))); // two layers: o and down rows of q8 bytes + f16 scales
    g.decoder.dispose(); ref.weights.dispose();
  });

  it('reports download progress for the file: one initiate, then loaded up to total = the file size', async () => {
    vi.stubGlobal('fetch', rangeFetch);
    const events: EngineEvent[] = [];
    const d = await loadDecoderFromUrl(BF16, new CpuBackend('f32'), { fetch: progressFetch({ onEvent: (e) => void events.push(e) }) });
    d.dispose();
    const path = '/gguf/qwen3-tiny-BF16.gguf';
    expect(events.filter((e) => e.type === 'initiate')).toEqual([{ type: 'initiate', file: path }]);
    const dl = events.filter((e): e is Extract<EngineEvent, { type: 'download' }> => e.type === 'download');
    expect(dl.every((e) => e.file === path)).toBe(true);
    expect(dl.map((e) => e.loaded)).toEqual([...dl.map((e) => e.loaded)].sort((a, b) => a - b));
    expect(dl.at(-1)).toEqual({ type: 'download', file: path, loaded: files.get(BF16)!.length, total: files.get(BF16)!.length });
  });

  it('a missing GGUF is MissingCheckpoint naming its URL', async () => {
    await expect(
      loadDecoderFromUrl(`${host}/gguf/nope.gguf`, new CpuBackend('f32'), { fetch: rangeFetch, what: 'role planner' }),
    ).rejects.toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringContaining(`role planner: cannot fetch ${host}/gguf/nope.gguf`),
    });
  });
});

describe('planning a GGUF backbone', () => {
  it('counts the file size and the stored tensors (quantized sizes) from the header alone', async () => {
    const cpu = new CpuBackend('f32');
    for (const url of [BF16, Q8]) {
      served.length = 0;
      const g = await planGgufModel(url, rangeFetch);
      expect(g).toMatchObject({ url, bytes: files.get(url)!.length });
      const plan = planSystemDownload(
        [{ url, bytes: g.bytes }],
        [g.model],
        { maxStorageBufferBindingSize: 2 ** 30, maxBufferSize: 2 ** 30, features: [] },
        null,
      );
      expect([plan.fetchBytes, plan.totalBytes, plan.refusal]).toEqual([files.get(url)!.length, files.get(url)!.length, null]);
      // the planned weights are what the loader uploads
      const d = await loadGgufDecoderFromUrl(url, cpu, { fetch: rangeFetch });
      expect(plan.models[0].weights).toBe(d.weights.totalBytes);
      d.decoder.dispose();
    }
    const [bf, q8] = await Promise.all([planGgufModel(BF16, rangeFetch), planGgufModel(Q8, rangeFetch)]);
    const limits = { maxStorageBufferBindingSize: 2 ** 30, maxBufferSize: 2 ** 30, features: [] };
    const w = (m: typeof bf.model) => planSystemDownload([], [m], limits, null).models[0].weights;
    // o (48×64) and down (48×128) per layer, two layers: bf16 2 bytes/value → q8_0 34 bytes per 32 values
    expect(w(bf.model) - w(q8.model)).toBe(2 * (48 * 64 * 2 + 48 * 128 * 2) - 2 * (48 * (64 / 32) * 34 + 48 * (128 / 32) * 34));
  });

  it('refuses where one row exceeds the binding limit, and a tensor type the engine does not read', async () => {
    const { model } = await planGgufModel(Q8, rangeFetch);
    const small = planSystemDownload([], [model], { maxStorageBufferBindingSize: 100, maxBufferSize: 2 ** 30, features: [] }, null);
    // the embedding row: 48 bf16 values = 96 bytes fits; down_proj's q8_0 row: 128 values → 128 + 4·2 = 136 bytes does not
    expect(small.refusalName).toBe('BindingLimitExceeded');
    expect(small.refusal).toBe(
      'model 1: one row of "model.layers.0.mlp.down_proj.weight" (q8_0, 136 bytes) is larger than this adapter\'s 100-byte ' +
        'storage-binding limit, so it cannot be split to fit; use a device with larger limits or a smaller model',
    );
    const odd = { ...model, tensors: model.tensors!.map((t, i) => (i === 3 ? { ...t, dtype: null, typeName: 'Q5_K' } : t)) };
    const oddPlan = planSystemDownload([], [odd], { maxStorageBufferBindingSize: 2 ** 30, maxBufferSize: 2 ** 30, features: [] }, null);
    expect([oddPlan.refusalName, oddPlan.refusal]).toEqual([
      'UnsupportedFeature',
      `model 1: "${model.tensors![3].name}" is stored as Q5_K, which this engine does not read; use a GGUF converted to f16, q8_0 or q4_0`,
    ]);
  });
});

describe('a system spec with a GGUF role', () => {
  const disk = (p: string) => `${diskRoot}${join(standIn, p)}`;
  const spec = (planner: SystemSpec['roles'][string]): SystemSpec => ({
    style: 'tiny_sequential', prompts: disk('prompts.json'),
    roles: {
      planner,
      critic: { model: `${disk('critic')}/`, innerLink: disk('critic/adapter.pt') },
      solver: { model: `${disk('solver')}/`, innerLink: disk('solver/adapter.pt') },
    },
    outer: Object.fromEntries(['outer_12', 'outer_23', 'outer_31'].map((k) => [k, disk(`outer/${k}.pt`)])),
  });
  const PLANNER_GGUF = `${host}/gguf/planner.gguf`;

  it('loads the planner from the GGUF (tokenizer from its folder) and answers through ask() as the folder system does', async () => {
    files.set(PLANNER_GGUF, await folderGguf(join(standIn, 'planner')));
    vi.stubGlobal('fetch', rangeFetch);
    const cpu = new CpuBackend('f32');
    const opts = { question: 'What is 2+3?', rounds: 2, latentSteps: 3, sampling: { greedy: true }, maxNewTokens: 8, answerRetry: false };
    served.length = 0;
    const events: EngineEvent[] = [];
    const g = await loadSystemFromSpec(
      spec({ model: PLANNER_GGUF, tokenizer: `${disk('planner')}/`, innerLink: disk('planner/adapter.pt') }),
      cpu,
      { onEvent: (e) => void events.push(e) },
    );
    expect(served.filter((s) => s.url === PLANNER_GGUF).every((s) => s.range !== null)).toBe(true);
    expect(served.some((s) => s.url.endsWith('/planner/model.safetensors'))).toBe(false);
    const n = files.get(PLANNER_GGUF)!.length;
    expect(events.filter((e) => e.type === 'download' && e.file === '/gguf/planner.gguf').at(-1)).toEqual({
      type: 'download',
      file: '/gguf/planner.gguf',
      loaded: n,
      total: n,
    });
    expect(g.agents.get('planner')!.source).toBe(PLANNER_GGUF);
    // every stage's collected hidden states (the latents sent on), exactly, and the decoded answer
    const stages = (into: unknown[][]) => ({
      onStage: (r: StageRecord) => void into.push([r.role, r.model, r.hidden ? vals(r.hidden) : null, r.generatedIds]),
    });
    const sa: unknown[][] = [];
    const a = await ask(g, { ...opts, ...stages(sa) });
    g.dispose();
    const f = await loadSystemFromSpec(spec({ model: `${disk('planner')}/`, innerLink: disk('planner/adapter.pt') }), cpu);
    const sb: unknown[][] = [];
    const b = await ask(f, { ...opts, ...stages(sb) });
    f.dispose();
    expect(a.tokens).toBe(8);
    expect([a.text, a.tokens, a.latentSteps]).toEqual([b.text, b.tokens, b.latentSteps]);
    expect(sa.map((r) => r[1])).toEqual([
      PLANNER_GGUF,
      expect.stringMatching(/critic\/$/),
      expect.stringMatching(/solver\/$/),
      PLANNER_GGUF,
      expect.stringMatching(/critic\/$/),
      expect.stringMatching(/solver\/$/),
    ]);
    expect((sa[0][2] as number[]).length).toBe(3 * 48); // 3 latents of the 48-wide planner
    expect(sa.map((r) => [r[0], r[2], r[3]])).toEqual(sb.map((r) => [r[0], r[2], r[3]]));
  });

  it('a GGUF role without a tokenizer folder is InvalidArgument; a link of another width names the GGUF', async () => {
    files.set(PLANNER_GGUF, await folderGguf(join(standIn, 'planner')));
    vi.stubGlobal('fetch', rangeFetch);
    const cpu = new CpuBackend('f32');
    await expect(loadSystemFromSpec(spec({ model: PLANNER_GGUF, innerLink: disk('planner/adapter.pt') }), cpu)).rejects.toMatchObject({
      name: 'InvalidArgument',
      message: expect.stringMatching(
        /^system spec: role planner: model http:\/\/hub\.test\/gguf\/planner\.gguf is a GGUF file, which brings no tokenizer\.json; add tokenizer/,
      ),
    });
    // the critic's link is 64 wide; the planner GGUF (qwen3-tiny) is 48
    await expect(
      loadSystemFromSpec(spec({ model: PLANNER_GGUF, tokenizer: `${disk('planner')}/`, innerLink: disk('critic/adapter.pt') }), cpu),
    ).rejects.toMatchObject({
      name: 'ShapeMismatch',
      message: expect.stringContaining(`(planner has hidden size 48 (qwen3 from the GGUF ${PLANNER_GGUF}))`),
    });
  });
});


describe('the Ask view\'s backbone fields (src/ui/system.ts)', () => {
  const noRegistry = async () => { throw new Error('no checkpoint was chosen'); };
  it('a .gguf backbone takes the tokenizer folder given, else the role\'s released folder; a folder backbone drops it', async () => {
    const g = 'https://huggingface.co/Qwen/Qwen3-1.7B-GGUF/resolve/main/Qwen3-1.7B-Q8_0.gguf';
    const spec = await buildSpec('sequential_light', {}, null, noRegistry, new Map(), {
      planner: { model: ` ${g} `, tokenizer: '' },
      critic: { model: g, tokenizer: 'https://huggingface.co/Qwen/Qwen3-1.7B/resolve/main/' },
      solver: { model: '' },
    });
    const released = await buildSpec('sequential_light', {}, null, noRegistry, new Map());
    expect(spec.roles.planner).toEqual({ model: g, tokenizer: released.roles.planner.model });
    expect(spec.roles.critic).toEqual({ model: g, tokenizer: 'https://huggingface.co/Qwen/Qwen3-1.7B/resolve/main/' });
    expect(spec.roles.solver).toEqual(released.roles.solver);
    expect(spec.label).toBe('released + backbone planner: Qwen3-1.7B-Q8_0.gguf, backbone critic: Qwen3-1.7B-Q8_0.gguf');
    const back = withBackbones(spec, { planner: { model: 'https://x.test/m/' } });
    expect(back.spec.roles.planner).toEqual({ model: 'https://x.test/m/' });
    expect(() =>
      withBackbones({ style: 'sequential_light', roles: { planner: { model: g } } }, { planner: { model: `${g}?download=1` } }),
    ).toThrow(
      expect.objectContaining({
        name: 'InvalidArgument',
        message: expect.stringMatching(/^role planner: .*\.gguf\?download=1 is a GGUF file.*give its tokenizer folder/),
      }),
    );
  });
});
