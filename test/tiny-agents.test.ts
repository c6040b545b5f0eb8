/**
 * scripts/tiny-system/train-agents.ts on a short CPU run: three hidden-32, one-layer agents (one per family)
 * trained 30 steps from a fixed seed. The written folders load as decoder + tokenizer with the family's
 * config, each agent's training loss falls, and a second run writes the same model.safetensors bytes.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type AgentResult, type AgentSpec, trainTinyAgents } from '../scripts/tiny-system/train-agents';
import { loadDecoderFromDir } from '../src/model/dir';
import { CpuBackend } from '../src/tensor/cpu';
import { loadTokenizerFromDir } from '../src/tokenizer';

const SMALL: AgentSpec[] = [
  {
    role: 'planner',
    name: 'planner-qwen3',
    family: 'qwen3',
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 64,
    tie: true,
  },
  {
    role: 'critic',
    name: 'critic-llama',
    family: 'llama',
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 64,
    tie: false,
  },
  {
    role: 'solver',
    name: 'solver-qwen2',
    family: 'qwen2',
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 64,
    tie: true,
  },
];
const STEPS = 30;
const dirs: string[] = [];

async function run(specs: AgentSpec[]): Promise<AgentResult[]> {
  const out = await mkdtemp(join(tmpdir(), 'tiny-agents-'));
  dirs.push(out);
  return trainTinyAgents({
    out, specs, steps: STEPS, seed: 11, batchSize: 1, gradAccum: 1, lr: 1e-2, warmup: 3, trainRows: 64, logEvery: 0,
    backend: new CpuBackend('f32'),
  });
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('train-agents: a short CPU run', () => {
  let first: AgentResult[];

  it('trains three agents whose folders load and whose loss falls', async () => {
    first = await run(SMALL);
    expect(first.map((r) => r.name)).toEqual(['planner-qwen3', 'critic-llama', 'solver-qwen2']);
    const cpu = new CpuBackend('f32');
    for (const [i, r] of first.entries()) {
      expect(r.losses).toHaveLength(STEPS);
      expect(r.skipped).toBe(0);
      // from ~ln(vocab) ≈ 6.1 at init; the assistant span is mostly fixed template text, learned first
      expect(r.losses[0]).toBeGreaterThan(5.8);
      expect(mean(r.losses.slice(0, 5)) - mean(r.losses.slice(-5))).toBeGreaterThan(1.5);
      const decoder = await loadDecoderFromDir(r.dir, cpu);
      expect(decoder.config.family).toBe(SMALL[i]!.family);
      expect(decoder.config.hidden).toBe(32);
      decoder.dispose();
      const tok = await loadTokenizerFromDir(r.dir);
      expect(tok.idOf('<|im_end|>')).toBeTypeOf('number');
      const config = JSON.parse(await readFile(join(r.dir, 'config.json'), 'utf8'));
      expect(config.architectures).toEqual([
        {
          qwen3: 'Qwen3ForCausalLM',
          llama: 'LlamaForCausalLM',
          qwen2: 'Qwen2ForCausalLM',
          mistral: 'MistralForCausalLM',
          gemma3: 'Gemma3ForConditionalGeneration',
          qwen3_5: 'Qwen3_5ForConditionalGeneration',
        }[SMALL[i]!.family],
      ]);
      expect(config.max_position_embeddings).toBeGreaterThanOrEqual(256);
    }
  }, 60_000);

  it('is deterministic: a second run from the same seed writes identical weights', async () => {
    const solver = [SMALL[2]!];
    const again = await run(solver);
    const a = await readFile(join(first[2]!.dir, 'model.safetensors'));
    const b = await readFile(join(again[0]!.dir, 'model.safetensors'));
    expect(b.length).toBe(a.length);
    expect(Buffer.compare(a, b)).toBe(0);
    expect(again[0]!.losses).toEqual(first[2]!.losses);
  }, 60_000);
});
