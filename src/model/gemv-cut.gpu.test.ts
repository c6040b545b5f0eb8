/**
 * The decode GEMVs' cut (ContextOptions.gemv, kernels/fused/gemv-wgsl.ts gemvGeometry) on a software adapter, Dawn on
 * lavapipe: 'auto' takes the narrow cut there; each GEMV of a decode step launches the workgroups and invocations that
 * cut says (8 lanes a row, lavapipe's subgroup width, 16 rows a workgroup; a 64-invocation prologue per normalised
 * GEMV), against 32 lanes × 8 rows in the wide cut; and a token decoded one step at a time gives PyTorch's logits
 * (the golden files, float64) and the CPU backend's greedy ids in both cuts.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { F } from '../autograd';
import { openCheckpoint } from '../formats/safetensors-sharded';
import type { Dispatch } from '../gpu/context';
import { counterDelta, stepSubmits } from '../gpu/counters';
import { isSoftwareAdapter } from '../gpu/device';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import { tidy } from '../tensor/scope';
import type { WebGpuBackend } from '../tensor/webgpu';
import { scaledError } from '../testing/model';
import { freshGpuBackend } from '../../test/util/gpu';
import { parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import { generate } from './generate';
import { loadDecoderWeights } from './weights';

let narrow: WebGpuBackend;
let wide: WebGpuBackend;
beforeAll(async () => {
  narrow = await freshGpuBackend();
  wide = await freshGpuBackend({ gemv: 'wide' });
});
afterAll(() => {
  narrow?.ctx.device.destroy();
  wide?.ctx.device.destroy();
});

async function load(name: string, b: Backend): Promise<Decoder> {
  const dir = `models/tiny/${name}`;
  const config = parseDecoderConfig(readFileSync(`${dir}/config.json`, 'utf8'));
  return new Decoder(config, await loadDecoderWeights(config, await openCheckpoint(dir), b));
}

/** Every fused GEMV dispatch of `run` on `b`: prologue or GEMV, its workgroups, and invocations per workgroup. */
async function gemvDispatches(b: WebGpuBackend, run: () => Promise<void>): Promise<[string, number, number][]> {
  const ctx = b.ctx;
  const seen: [string, number, number][] = [];
  const dispatch = ctx.dispatch.bind(ctx);
  ctx.dispatch = (d: Dispatch) => {
    dispatch(d);
    const [x, y = 1, z = 1] = d.workgroups;
    const kind = d.key.includes('_prologue') ? 'prologue' : 'gemv';
    if (d.key.startsWith('fused_gemv')) seen.push([kind, x * y * z, ctx.pipelines.invocations(d.key)]);
  };
  try {
    await run();
  } finally {
    ctx.dispatch = dispatch;
  }
  return seen;
}

describe('the GEMV cut on a CPU rasteriser (lavapipe)', () => {
  it('auto takes the narrow cut, its lanes lavapipe\'s subgroup width', () => {
    expect(isSoftwareAdapter(narrow.ctx.report)).toBe(true);
    expect([narrow.ctx.gemvNarrow, wide.ctx.gemvNarrow]).toEqual([true, false]);
    expect(narrow.ctx.subgroupMin).toBe(8);
  });

  it('llama-tiny: the workgroups and invocations of each GEMV and of a whole decode step', async () => {
    // hidden 64 (8 bf16 words a row), q|k|v 64 + 32 + 32 rows, MLP 160 (20 words a row), vocab 461; 2 layers
    const per: Record<string, { gemvs: [string, number, number][]; step: ReturnType<typeof counterDelta> }> = {};
    for (const [cut, b] of [['narrow', narrow], ['wide', wide]] as const) {
      const m = await load('llama-tiny', b);
      const cache = m.newCache(4);
      const first = tidy(() => F.argmax(m.forward({ inputIds: b.fromValues([3, 17], [2], 'i32'), cache, logits: 'last' }).logits!));
      await first.readI32();
      const before = b.counters();
      const gemvs = await gemvDispatches(b, async () => {
        const next = tidy(() => F.argmax(m.forward({ inputIds: first, cache, logits: 'last' }).logits!));
        await next.readI32();
        next.dispose();
      });
      per[cut] = { gemvs, step: counterDelta(before, b.counters()) };
      first.dispose();
      cache.dispose();
      m.weights.dispose();
    }
    // narrow: 8 lanes × 16 rows = 128 invocations; the norm's prologue one 64-invocation workgroup per 4 rows of x
    const n = (rows: number): [string, number, number] => ['gemv', Math.ceil(rows / 16), 128];
    const pro: [string, number, number] = ['prologue', 1, 64];
    const narrowLayer = [pro, n(128), n(64), pro, n(160), n(64)];
    expect(per.narrow.gemvs).toEqual([...narrowLayer, ...narrowLayer, n(461)]);
    // wide: 32 lanes × 8 rows = 256 invocations, the statistics in every workgroup
    const w = (rows: number): [string, number, number] => ['gemv', Math.ceil(rows / 8), 256];
    const wideLayer = [w(128), w(64), w(160), w(64)];
    expect(per.wide.gemvs).toEqual([...wideLayer, ...wideLayer, w(461)]);
    // the whole step (the figures docs/performance.md quotes): embedding, RoPE + append, attention, final norm, argmax
    const step = (c: ReturnType<typeof counterDelta>) => [c.dispatches, c.workgroups, c.invocations, c.submits, c.readbacks];
    expect(step(per.narrow.step)).toEqual([20, 104, 12_480, stepSubmits(20), 1]);
    expect(step(per.wide.step)).toEqual([16, 181, 43_328, stepSubmits(16), 1]);
  });

  it.each(['llama-tiny', 'qwen3-tiny'])('%s decoded a token at a time: PyTorch\'s logits in both cuts', async (name) => {
    const golden = JSON.parse(readFileSync(`test/golden/tiny-${name}.json`, 'utf8')) as { ids: number[]; logits: string };
    const buf = Buffer.from(golden.logits, 'base64');
    const want = new Float64Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    for (const b of [narrow, wide]) {
      const m = await load(name, b);
      m.kvDtype = 'f32'; // the golden files' cache; an f16 one moves logits by f16's step (kv-f16.gpu.test.ts)
      const cache = m.newCache(golden.ids.length);
      const got: number[] = [];
      for (const id of golden.ids) {
        const logits = tidy(() => m.forward({ inputIds: b.fromValues([id], [1], 'i32'), cache, logits: 'last' }).logits!);
        got.push(...(await logits.read()));
        logits.dispose();
      }
      // f32 against float64: measured 1.4-2.3e-7 of the peak in either cut (the golden files' bound for f32 is 1e-4)
      const err = scaledError(got, want);
      console.log(`${name} ${b === narrow ? 'narrow' : 'wide'}: logits ${err.toExponential(2)} of the peak from PyTorch's`);
      expect(err, b === narrow ? 'narrow' : 'wide').toBeLessThan(1e-5);
      cache.dispose();
      m.weights.dispose();
    }
  });

  it.each(['llama-tiny', 'system/planner'])('%s: the CPU backend\'s greedy ids in both cuts', async (name) => {
    const opts = { inputIds: [72, 101, 108, 108, 111, 44, 32, 119], maxNewTokens: 24, sampling: { greedy: true }, eosTokenIds: [] };
    const ids: number[][] = [];
    for (const b of [new CpuBackend('f32'), narrow, wide] as Backend[]) {
      const m = await load(name, b);
      ids.push((await generate(m, opts)).tokens);
      m.weights.dispose();
    }
    expect(new Set(ids[0]).size, 'varied ids').toBeGreaterThan(3);
    expect(ids[1]).toEqual(ids[0]);
    expect(ids[2]).toEqual(ids[0]);
  });
});
