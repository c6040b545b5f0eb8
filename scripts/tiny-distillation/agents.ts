/**
 * Trains the tiny distillation system's two agents from scratch on the price-list task
 * (src/eval/tiny-prices.ts), each a full-weight decoder of this project's engine on its role's chats exactly
 * as inference renders them (system prompt, the role's prompt from prompts.ts with text in its slot, the
 * generation prompt, then the target and <|im_end|>; loss on the target only):
 *   - the expert (Qwen3-style) answers the question with the item's price note ("4 coins per glim."); half of
 *     its chats are the feedback prompt of later rounds, whose slot holds a learner's answer (its own row's or
 *     another's), so it learns to give the price whatever the feedback says;
 *   - the learner (Llama-style) answers from the note in its expert slot. Its notes carry prices drawn at
 *     random, never the list's, so it learns to read the slot and multiply but cannot learn the list; a
 *     quarter of its chats have an empty slot and a random price's answer, so alone it guesses.
 * Both share one byte-level BPE whose merges come from the task's texts and the prompts (every number and
 * every item one token). Each agent goes to OUT/<role>/ in Hugging Face layout. On the CPU backend a run is
 * a pure function of the seed.
 *
 *   npx tsx scripts/tiny-distillation/build.ts agents --out DIR [--role expert|learner] [--steps N] [--seed S]
 */
import { join } from 'node:path';
import { AdamW } from '../../src/autograd/ops/optim.ts';
import {
  allPriceRows,
  expertNote,
  learnerAnswer,
  PRICE_RANGE,
  priceSplit,
  type PriceRow,
} from '../../src/eval/tiny-prices.ts';
import { scoreAnswer } from '../../src/eval/tiny-task.ts';
import { userPrompt, type PromptKind } from '../../src/mas/prompts.ts';
import { SLOTS } from '../../src/mas/slots.ts';
import { parseDecoderConfig } from '../../src/model/config.ts';
import { loadDecoderFromDir } from '../../src/model/dir.ts';
import { generate } from '../../src/model/generate.ts';
import { createTrainableDecoder, saveDecoderCheckpoint } from '../../src/model/trainable.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { loadTokenizerFromDir } from '../../src/tokenizer/index.ts';
import { renderChat } from '../../src/tokenizer/slots.ts';
import type { Tokenizer } from '../../src/tokenizer/tokenizer.ts';
import { initialState, trainLoop } from '../../src/train/loop.ts';
import { Rng } from '../../src/util/rng.ts';
import type { TinySpec } from '../tiny-system/tiny-models.ts';
import { buildTinyTokenizer, type TinyTokenizer } from '../tiny-system/tokenizer.ts';
import { recordSteps, sequenceStep, writeAgentFiles } from '../tiny-system/train-agents.ts';
import { DISTILL_PROMPT_FILE, DISTILL_PROMPTS } from './prompts.ts';

export const DISTILL_ROLES = ['expert', 'learner'] as const;
export type DistillRole = (typeof DISTILL_ROLES)[number];

export interface DistillAgentSpec extends Omit<TinySpec, 'seed' | 'separateTemplate'> {
  role: DistillRole;
  steps: number;
  lr: number;
}

/** The two agents: different families, so their embedding spaces differ as upstream's do. */
export const DISTILL_AGENTS: readonly DistillAgentSpec[] = [
  {
    role: 'expert',
    name: 'expert-qwen3',
    family: 'qwen3',
    hidden: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 176,
    tie: true,
    steps: 1500,
    lr: 5e-3,
  },
  {
    role: 'learner',
    name: 'learner-llama',
    family: 'llama',
    hidden: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 176,
    tie: false,
    steps: 4000,
    lr: 5e-3,
  },
];

export const AGENT_DEFAULTS = { seed: 7, batchSize: 4, warmup: 20, logEvery: 100 } as const;

/**
 * The agents' chat template: ChatML whose answer turn always opens with an empty think block, in the prompt
 * (the generation prompt) and in a rendered chat's final assistant message alike, as Qwen3's template does
 * with thinking off. The tiny tokenizer's template adds the block to the generation prompt only, so a short
 * answer would vanish under inner training's mask by prompt length (docs/method.md §12.7); here the prompt
 * render is a prefix of the full chat. The block's four tokens also give the tiny learner room to multiply.
 */
export const DISTILL_CHAT_TEMPLATE =
  '{%- for message in messages %}' +
  "{%- if message['role'] == 'assistant' and loop.last %}" +
  "{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + message['content'] + '<|im_end|>\\n' }}" +
  '{%- else %}' +
  "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
  '{%- endif %}' +
  '{%- endfor %}' +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{%- endif %}";

/**
 * The shared tokenizer. Its merges come from every question, every note at every price and every answer,
 * with digits in groups, so that each number and each item is a single token; its template is
 * DISTILL_CHAT_TEMPLATE.
 */
export function distillTokenizer(): TinyTokenizer {
  const rows = allPriceRows();
  const texts = rows.flatMap((r) => [r.question, r.answer]);
  for (const r of rows.filter((r) => r.quantity === 2))
    for (let p = PRICE_RANGE[0]; p <= PRICE_RANGE[1]; p++) texts.push(expertNote(r.item, p));
  const prompts = [DISTILL_PROMPT_FILE.system.distill, ...Object.values(DISTILL_PROMPT_FILE.templates)];
  const tok = buildTinyTokenizer({ merges: 400, corpus: [...prompts, ...texts].join('\n'), digitGroups: true });
  const tokenizerConfig = { ...tok.tokenizerConfig, chat_template: DISTILL_CHAT_TEMPLATE };
  return { ...tok, chatTemplate: DISTILL_CHAT_TEMPLATE, tokenizerConfig };
}

/** The rendered prompt of a role (generation prompt included) with `slot` as the text of its slot. */
export function distillPrompt(tok: Tokenizer, role: DistillRole, kind: PromptKind, question: string, slot: string): string {
  let user = userPrompt('distill', role, kind, { question, task: 'math', round: kind === 'first' ? 1 : 2 }, DISTILL_PROMPTS);
  for (const s of Object.values(SLOTS)) user = user.replace(s, () => slot);
  return renderChat(tok, DISTILL_PROMPTS.system.distill, user);
}

/** What one training chat of a role shows: prompt kind, the text in its slot, the target. */
export function distillTurn(
  role: DistillRole,
  rows: readonly PriceRow[],
  index: number,
  rng: Rng,
): { kind: PromptKind; slot: string; target: string } {
  const row = rows[index]!;
  if (role === 'expert') {
    if (index % 2 === 0) return { kind: 'first', slot: '', target: row.distill_expert };
    const other = rows[(index * 7 + 13) % rows.length]!;
    return { kind: 'feedback', slot: (index % 4 === 1 ? row : other).answer, target: row.distill_expert };
  }
  // a price drawn at random: the learner reads it from the slot and cannot learn the list
  const price = PRICE_RANGE[0] + rng.int(PRICE_RANGE[1] - PRICE_RANGE[0] + 1);
  const slot = index % 4 === 3 ? '' : expertNote(row.item, price);
  return { kind: 'first', slot, target: learnerAnswer(row.quantity, price) };
}

/** A role's training chats (ids + target mask), one per row; a pure function of `seed`. */
export function distillExamples(tok: Tokenizer, role: DistillRole, rows: readonly PriceRow[], seed: number) {
  const rng = new Rng(seed);
  const enc = (text: string) => tok.encode(text, { addSpecialTokens: false });
  return rows.map((row, i) => {
    const turn = distillTurn(role, rows, i, rng);
    const prompt = enc(distillPrompt(tok, role, turn.kind, row.question, turn.slot));
    const target = enc(`${turn.target}<|im_end|>`);
    return { ids: [...prompt, ...target], lossMask: [...prompt.map(() => 0), ...target.map(() => 1)] };
  });
}

export interface DistillAgentResult {
  role: DistillRole;
  dir: string;
  losses: number[];
  seconds: number;
  params: number;
}

/** Trains one agent and writes OUT/<role>/. */
export async function trainDistillAgent(
  spec: DistillAgentSpec,
  o: { out: string; seed?: number; steps?: number; stopAfter?: number; backend?: Backend; log?: (s: string) => void },
): Promise<DistillAgentResult> {
  const dir = join(o.out, spec.role);
  const tok0 = distillTokenizer();
  const configJson = await writeAgentFiles(dir, spec, tok0);
  const config = parseDecoderConfig(`${JSON.stringify(configJson)}\n`, join(dir, 'config.json'));
  const tok = await loadTokenizerFromDir(dir);
  const seed = (o.seed ?? AGENT_DEFAULTS.seed) * 1000 + DISTILL_ROLES.indexOf(spec.role);
  const data = distillExamples(tok, spec.role, priceSplit('train'), seed + 100);
  const steps = o.steps ?? spec.steps;
  const backend = o.backend ?? new CpuBackend('f32');
  const log = o.log ?? ((s: string) => process.stdout.write(`${s}\n`));
  const { decoder, params } = createTrainableDecoder(config, backend, { seed });
  const losses: number[] = [];
  const stop = new AbortController();
  const t0 = performance.now();
  try {
    const optimizer = new AdamW([params], { weightDecay: 0.01 });
    optimizer.zeroGrad();
    const { batchSize, warmup } = AGENT_DEFAULTS;
    await trainLoop(
      data.length,
      {
        maxSteps: steps,
        batchSize,
        gradAccumSteps: 1,
        lr: spec.lr,
        scheduler: 'cosine',
        warmupSteps: Math.min(warmup, steps - 1),
        seed,
        shuffle: true,
        saveSteps: 0,
      },
      {
        optimizer,
        runBatch: async (indices, scale) => {
          let loss = 0;
          let tokens = 0;
          for (const i of indices) {
            loss += (await sequenceStep(decoder, data[i]!, scale / indices.length)) / indices.length;
            tokens += data[i]!.ids.length;
          }
          optimizer.gather();
          return { loss, tokens, valid: indices.length, skipped: {} };
        },
        signal: stop.signal,
        onStep: recordSteps(losses, stop, {
          stopAfter: o.stopAfter,
          every: AGENT_DEFAULTS.logEvery,
          log,
          label: (e) => `${spec.name} step ${e.step}/${e.maxSteps}`,
        }),
      },
      initialState(data.length, { seed, shuffle: true }),
    );
    await saveDecoderCheckpoint(dir, params, { dtype: 'f32' });
  } finally {
    params.dispose();
    decoder.dispose();
  }
  const count = params.entries.reduce((s, e) => s + e.numel, 0);
  return { role: spec.role, dir, losses, seconds: (performance.now() - t0) / 1000, params: count };
}

/**
 * Greedy text accuracy of a trained agent folder on some rows: the expert's note against the gold note, the
 * learner's answer against the row's value with `slot(row)` in its slot (the gold note, nothing, …).
 */
export async function evalDistillAgent(
  dir: string,
  role: DistillRole,
  rows: readonly PriceRow[],
  slot: (row: PriceRow) => string = (r) => r.distill_expert,
  backend: Backend = new CpuBackend('f32'),
) {
  const decoder = await loadDecoderFromDir(dir, backend);
  const tok = await loadTokenizerFromDir(dir);
  const eos = [tok.idOf('<|im_end|>'), tok.idOf('<|endoftext|>')].filter((x): x is number => typeof x === 'number');
  let correct = 0;
  const outputs: string[] = [];
  try {
    for (const row of rows) {
      const text = distillPrompt(tok, role, 'first', row.question, role === 'learner' ? slot(row) : '');
      const ids = tok.encode(text, { addSpecialTokens: false });
      const r = await generate(decoder, { inputIds: ids, maxNewTokens: 16, sampling: { greedy: true }, eosTokenIds: eos });
      const out = tok.decode(r.tokens, { skipSpecialTokens: true });
      outputs.push(out);
      if (role === 'expert' ? out.trim() === row.distill_expert : scoreAnswer(out, row)) correct++;
    }
  } finally {
    decoder.dispose();
  }
  return { correct, total: rows.length, outputs };
}
