/**
 * A real `rmas ask` run (in-process) against the PyTorch reference: the golden script tokenised its stages
 * from exactly what this run renders (question "2+3?", test/golden/tiny-mas/prompts.json), so the dump of
 * each stage can be compared with the reference stage: the token ids exactly, the latents received, the
 * hidden states collected and the latents sent. Shared by the CPU and GPU tests.
 */
import { join } from 'node:path';
import { expect } from 'vitest';
import { scaledError } from '../../src/testing/model';
import type { KvDType } from '../../src/model/cache';
import type { Backend } from '../../src/tensor/backend';
import { f64 } from '../golden/check';
import { GOLDEN_OF_STAGE, GOLDEN_PROMPTS, GOLDEN_QUESTION, goldenLinkSystem, readDump, runAsk, type DumpStage } from './ask-util';
import { golden } from './golden';

export async function goldenAskRun(
  backend: Backend,
  dir: string,
  rounds: number,
  kvDtype: KvDType | 'auto' = 'auto',
): Promise<{ stages: DumpStage[]; answer: string }> {
  const dump = join(dir, `dump-${backend.kind}-${rounds}-${kvDtype}`);
  const r = await runAsk(
    {
      style: 'sequential_light',
      question: GOLDEN_QUESTION,
      prompts: GOLDEN_PROMPTS,
      ckpt_override: await goldenLinkSystem(join(dir, `sys-${backend.kind}-${rounds}`)),
      num_recursive_rounds: String(rounds),
      latent_length: String(golden.m),
      greedy: true,
      max_new_tokens: '6',
      no_ans: true,
      dump,
      json: true,
      kv_dtype: kvDtype,
    },
    backend,
  );
  if (r.error) throw r.error;
  return { stages: await readDump(dump), answer: (JSON.parse(r.out) as { answer: string }).answer };
}

/** Asserts every stage of a 2-round run against its golden stage; returns the largest error seen. */
export function expectStagesMatchGolden(stages: DumpStage[], tol: number): number {
  let worst = 0;
  const seen: string[] = [];
  for (const s of stages) {
    const name = GOLDEN_OF_STAGE[`${s.round} ${s.role}`];
    if (!name) continue;
    seen.push(name);
    const g = golden.stages[name];
    g.segments.forEach((seg, i) => expect(Array.from(s.tensors.get(`ids.${i}`)!.values), `${name} ids.${i}`).toEqual(seg));
    const check = (key: string, want: string) => {
      const e = scaledError(s.tensors.get(key)!.values, f64(want));
      worst = Math.max(worst, e);
      expect(e, `${name} ${key}`).toBeLessThan(tol);
    };
    if (g.latents_in) check('latents_in.0', g.latents_in);
    check('hidden', g.hidden!);
    for (const [k, v] of Object.entries(g.latents_out!)) check(`latents_out.${k}`, v);
  }
  expect(seen).toEqual(['planner', 'critic', 'solver_feedback', 'planner_round2']);
  return worst;
}

export function expectDecodeMatchesGolden(stages: DumpStage[], tol = 1e-5) {
  const s = stages[stages.length - 1];
  expect([s.round, s.role]).toEqual([1, 'solver']);
  const g = golden.stages.solver_decode;
  g.segments.forEach((seg, i) => expect(Array.from(s.tensors.get(`ids.${i}`)!.values)).toEqual(seg));
  expect(scaledError(s.tensors.get('latents_in.0')!.values, f64(g.latents_in!))).toBeLessThan(tol);
  expect(Array.from(s.tensors.get('generated_ids')!.values)).toEqual(g.generated_ids);
}
