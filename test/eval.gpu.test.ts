/**
 * A benchmark run on WebGPU (Dawn in Node) with the committed tiny system: questions asked one after the
 * other, each with several sampled rollouts and answer retries, hold no GPU memory past their question
 * (a run over MATH500's 500 questions must not grow), and score as the same run on the CPU with the same KV cache
 * (f16: the device's default, lavapipe having shader-f16; the CPU's is f32 unless asked).
 */
import { describe, expect, it } from 'vitest';
import { taskSplit } from '../src/eval/tiny-task';
import { toItems } from '../src/eval/datasets';
import { evaluate } from '../src/eval/evaluate';
import { loadSystem } from '../src/mas/system-folders';
import type { Backend } from '../src/tensor/backend';
import { CpuBackend } from '../src/tensor/cpu';
import { freshGpuBackend } from './util/gpu';

const rows = taskSplit('test').slice(0, 3).map((r) => ({ question: r.question, answer: String(r.answer_value) }));
const opts = {
  rounds: 2,
  latentSteps: 8,
  mode: 'latent' as const,
  maxNewTokens: 40,
  rollouts: 2,
  sampling: { temperature: 1.2, topP: 1, topK: 0, seed: 5 },
};

async function run(backend: Backend, onQuestion?: () => void) {
  const items = await toItems(null, rows);
  const system = await loadSystem('tiny_sequential', { backend, task: 'math' });
  // the device's own default; the CPU asked for the same cache
  for (const a of system.agents.values()) {
    if (backend.kind === 'cpu') a.decoder.kvDtype = 'f16';
    expect(a.decoder.kvDtype).toBe('f16');
  }
  try {
    return await evaluate(system, items, { ...opts, onSample: () => onQuestion?.() });
  } finally {
    system.dispose();
  }
}

describe('rmas run on WebGPU', () => {
  it('frees every question\'s tensors and scores as the CPU does', async () => {
    const gpu = await freshGpuBackend();
    expect(gpu.ctx.hasFeature('shader-f16')).toBe(true);
    const live: number[] = [];
    const r = await run(gpu, () => live.push(gpu.ctx.pool.liveBytes));
    // the system's weights stay; nothing else may
    expect(live).toHaveLength(3);
    expect(new Set(live).size, `live bytes after each question: ${live.join(', ')}`).toBe(1);
    const cpu = await run(new CpuBackend('f32'));
    expect(r.records.map((s) => s.rollouts.map((o) => o.raw_output))).toEqual(cpu.records.map((s) => s.rollouts.map((o) => o.raw_output)));
    expect(r.summary).toEqual({ ...cpu.summary, seconds_mean: r.summary.seconds_mean });
    gpu.ctx.destroy();
  }, 300_000);
});
