/**
 * `rmas ask` on WebGPU (Dawn in Node): the same runs as on the CPU give the same stages, token ids,
 * greedy answers and, within f32 reduction-order noise, the same latents; and the run on the system whose
 * links PyTorch saved matches the PyTorch reference stage by stage (see ./ask-golden.ts).
 * Latents: scaledError per array (max |gpu − cpu| / max |cpu|), bound 1e-5 with f32 KV caches (against PyTorch the
 * GPU run measures ≤ 6.8e-7). With f16 caches (the default here: lavapipe has shader-f16), both backends round each k
 * and v to f16 as it is written; a value whose two f32 results straddle a rounding boundary lands one f16 ulp
 * (2^-11) apart, so the bound is F16_TOL against the CPU's f16 run, and F16_GOLDEN against PyTorch's f32 cache.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scaledError } from '../../src/testing/model';
import { CpuBackend } from '../../src/tensor/cpu';
import type { Backend } from '../../src/tensor/backend';
import { gpuBackend } from '../util/gpu';
import { expectDecodeMatchesGolden, expectStagesMatchGolden, goldenAskRun } from './ask-golden';
import { overridesFor, readDump, runAsk } from './ask-util';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-ask-gpu-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const TOL = 1e-5;
const F16_TOL = 1e-4;
const F16_GOLDEN = 2e-3;

describe('rmas ask on WebGPU', () => {
  it('matches the PyTorch reference stage by stage and decodes its ids (f32 and f16 KV caches)', async () => {
    const gpu = await gpuBackend();
    expectStagesMatchGolden((await goldenAskRun(gpu, tmp, 2, 'f32')).stages, TOL);
    expectDecodeMatchesGolden((await goldenAskRun(gpu, tmp, 1, 'f32')).stages);
    const f16 = expectStagesMatchGolden((await goldenAskRun(gpu, tmp, 2)).stages, F16_GOLDEN);
    console.log(`ask on WebGPU with its default f16 KV cache vs PyTorch: ${f16.toExponential(2)} of peak`);
    expect(f16).toBeGreaterThan(TOL); // the default really rounded k and v
    expectDecodeMatchesGolden((await goldenAskRun(gpu, tmp, 1)).stages, F16_GOLDEN);
  });

  for (const [mode, kv, tol] of [['latent', 'f32', TOL], ['text', 'f32', TOL], ['latent', 'f16', F16_TOL]] as const) {
    it(`${mode} mode, ${kv} KV cache: same stages, ids, latents and greedy answer as the CPU`, async () => {
      const o = await overridesFor('sequential_light', join(tmp, `sys-${mode}-${kv}`));
      const run = async (be: Backend) => {
        const dump = join(tmp, `dump-${mode}-${kv}-${be.kind}`);
        const r = await runAsk({
          style: 'sequential_light', question: 'What is 12 + 30?', ckpt_override: o, num_recursive_rounds: '2', latent_length: '4',
          greedy: true, max_new_tokens: '8', mode, dump, json: true, kv_dtype: kv,
        }, be);
        expect(r.error).toBeNull();
        expect(r.err).toContain(`; ${kv} KV cache\n`);
        return { json: JSON.parse(r.out) as { answer: string; text: string; tokens: number }, stages: await readDump(dump) };
      };
      const cpu = await run(new CpuBackend('f32'));
      const gpu = await run(await gpuBackend());
      expect(gpu.json.text).toBe(cpu.json.text);
      expect(gpu.json.answer).toBe(cpu.json.answer);
      expect(gpu.json.tokens).toBe(cpu.json.tokens);
      expect(gpu.stages.map((s) => [s.file, s.round, s.role, s.slots, s.links_out])).toEqual(
        cpu.stages.map((s) => [s.file, s.round, s.role, s.slots, s.links_out]),
      );
      let worst = 0;
      for (const [i, c] of cpu.stages.entries()) {
        const g = gpu.stages[i];
        expect([...g.tensors.keys()]).toEqual([...c.tensors.keys()]);
        for (const [name, t] of c.tensors) {
          const u = g.tensors.get(name)!;
          expect(u.shape, `${c.file} ${name}`).toEqual(t.shape);
          if (t.dtype === 'I32') expect(Array.from(u.values), `${c.file} ${name}`).toEqual(Array.from(t.values));
          else {
            const e = scaledError(u.values, t.values);
            worst = Math.max(worst, e);
            expect(e, `${c.file} ${name}`).toBeLessThan(tol);
          }
        }
      }
      if (mode === 'latent') expect(worst).toBeGreaterThan(0); // the backends really computed separately
      console.log(`ask ${mode}, ${kv} KV cache: WebGPU vs CPU ${worst.toExponential(2)} of peak`);
    });
  }
});
