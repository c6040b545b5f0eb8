/**
 * `npm run bench:gpu -- --realsize` runs bench:realsize on the machine's GPU; no GPU is here, so this checks its plan:
 * the arguments bench/realsize.ts gets (bench/realsize/gpu-plan.ts), and that bad names fail before any model loads.
 */
import { describe, expect, it } from 'vitest';
import { ENGINES, NODE_GPU_ENGINES, covers, parseEngines } from '../bench/realsize/engines';
import { realsizeGpuArgs } from '../bench/realsize/gpu-plan';
import { REALSIZE_MODELS } from '../bench/realsize/models';

/** argv as flag → value. */
const flags = (argv: string[]) => Object.fromEntries(argv.flatMap((a, i) => (a.startsWith('--') ? [[a.slice(2), argv[i + 1]]] : [])));

describe('bench:gpu --realsize plan', () => {
  it('runs the GPU engines on every released config at the issue prompt lengths', () => {
    expect(flags(realsizeGpuArgs({}))).toEqual({
      models: REALSIZE_MODELS.map((m) => m.name).join(','), engines: 'ours-webgpu,tjs-webgpu', prompts: '128,512',
      new: '64', latent: '16', reps: '3',
    });
    expect(NODE_GPU_ENGINES.every((e) => ENGINES.includes(e))).toBe(true);
  });

  it('--quick is one model and one short prompt; given flags pass through, checked', () => {
    expect(flags(realsizeGpuArgs({ quick: true }))).toEqual({
      models: 'Qwen3-0.6B', engines: 'ours-webgpu,tjs-webgpu', prompts: '16', new: '4', latent: '2', reps: '1',
    });
    const f = flags(realsizeGpuArgs({ models: 'Qwen3-1.7B, Llama-3.2-1B', engines: 'ours-webgpu', prompts: '512', reps: '5', doc: 'gpu' }));
    expect([f.models, f.engines, f.prompts, f.reps, f.doc]).toEqual(['Qwen3-1.7B,Llama-3.2-1B', 'ours-webgpu', '512', '5', 'gpu']);
  });

  it('refuses unknown models and engines and prompt lengths that are not positive integers', () => {
    expect(() => realsizeGpuArgs({ models: 'Qwen3-7B' })).toThrow(/no real-size model Qwen3-7B/);
    expect(() => realsizeGpuArgs({ engines: 'ours-cuda' })).toThrow(/ours-cuda is not one of/);
    expect(() => realsizeGpuArgs({ prompts: '128,0' })).toThrow(/--prompts 128,0/);
    expect(() => realsizeGpuArgs({ reps: 'two' })).toThrow(/--reps two/);
    expect(() => parseEngines('')).toThrow(/at least one/);
  });

  it('the peers are asked only for the families they cover', () => {
    expect(['qwen3', 'llama', 'qwen3_5_text', 'gemma3_text'].map((t) => covers('tjs-webgpu', t))).toEqual([true, true, false, true]);
    expect(['qwen3', 'gemma3_text', 'qwen3_5_text', 'qwen2'].map((t) => covers('torch', t))).toEqual([true, true, true, false]);
    expect(covers('ours-page', 'qwen3_5_text')).toBe(true);
  });
});
