/**
 * The recursion system's two agents (src/eval/tiny-hops.ts), trained from scratch on text as the distillation
 * system's are (scripts/tiny-distillation/agents.ts: same families, sizes, tokenizer recipe and chat template),
 * each on its own half of the world:
 *   - the expert knows item → colour, shape → number and animal → tree. Its first prompt asks for the item's
 *     colour note; its feedback prompt holds a learner's answer, a shape, animal or an asked value, drawn at
 *     random, so it learns its lookups and the echo but never the learner's;
 *   - the learner knows colour → shape and number → animal. Its slot holds an expert's note whose value is drawn
 *     at random, so it cannot learn the expert's lookups; a sixth of its chats have the slot empty and a random
 *     value of the asked kind as the answer, so alone it guesses.
 * Each agent goes to OUT/<role>/ in Hugging Face layout; on the CPU backend a run is a pure function of the seed.
 */
import { join } from 'node:path';
import { AdamW } from '../../src/autograd/ops/optim.ts';
import {
  allHopRows,
  expertReply,
  HOP_VALUES,
  hopAnswer,
  hopSplit,
  hopWorld,
  learnerReply,
  type HopKind,
  type HopRow,
  type HopStage,
  type HopTarget,
  type HopWorld,
} from '../../src/eval/tiny-hops.ts';
import { userPrompt, type PromptKind } from '../../src/mas/prompts.ts';
import { SLOTS } from '../../src/mas/slots.ts';
import { parseDecoderConfig } from '../../src/model/config.ts';
import { createTrainableDecoder, saveDecoderCheckpoint } from '../../src/model/trainable.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { loadTokenizerFromDir } from '../../src/tokenizer/index.ts';
import { renderChat } from '../../src/tokenizer/slots.ts';
import type { Tokenizer } from '../../src/tokenizer/tokenizer.ts';
import { initialState, trainLoop } from '../../src/train/loop.ts';
import { Rng } from '../../src/util/rng.ts';
import { DISTILL_AGENTS, DISTILL_CHAT_TEMPLATE, type DistillAgentSpec, type DistillRole } from '../tiny-distillation/agents.ts';
import { buildTinyTokenizer, type TinyTokenizer } from '../tiny-system/tokenizer.ts';
import { recordSteps, sequenceStep, writeAgentFiles } from '../tiny-system/train-agents.ts';
import { HOPS_PROMPT_FILE, HOPS_PROMPTS } from './prompts.ts';

export const HOPS_ROLES = ['expert', 'learner'] as const;

/**
 * The distillation system's two agents (qwen3 expert, llama learner, hidden 64, 2 layers), 6,000 steps each: on the
 * SIMD kernels 2,500 and 4,000 left both short of their facts (text-MAS 27/30/30 % at r = 1, 2, 3 against the
 * ceilings 33/67/100 %).
 */
export const HOPS_AGENTS: readonly DistillAgentSpec[] = DISTILL_AGENTS.map((a) => ({ ...a, name: `hops-${a.name}`, steps: 6000 }));
export const HOPS_AGENT_DEFAULTS = { seed: 7, batchSize: 4, warmup: 20, logEvery: 100, chats: 6000 } as const;

const V = HOP_VALUES;
const pick = <T>(rng: Rng, xs: readonly T[]) => xs[rng.int(xs.length)]!;

/** One training chat of a role on a row, the other agent's half drawn at random (see the file comment). */
export function hopsTurn(world: HopWorld, role: DistillRole, row: HopRow, rng: Rng): HopStage {
  const t = row.target;
  if (role === 'expert') {
    // first prompt a third of the time; otherwise a fed-back value of a kind the asked chain can hold
    const fedKinds: Record<HopTarget, HopKind[]> = { colour: ['colour'], number: ['shape', 'number'], tree: ['shape', 'animal', 'tree'] };
    if (rng.int(3) === 0) return { role, kind: 'first', slot: '', target: expertReply(world, t, row.item) };
    const fed = pick(rng, V[pick(rng, fedKinds[t]) as keyof typeof V]);
    return { role, kind: 'feedback', slot: hopAnswer(fed), target: expertReply(world, t, row.item, fed) };
  }
  if (rng.int(6) === 0) return { role, kind: 'first', slot: '', target: hopAnswer(pick(rng, V[t])) };
  const noteKinds: Record<HopTarget, ('colour' | 'number' | 'tree' | 'echo')[]> = {
    colour: ['colour', 'echo'],
    number: ['colour', 'number', 'echo'],
    tree: ['colour', 'number', 'tree', 'echo'],
  };
  const k = pick(rng, noteKinds[t]);
  const value = pick(rng, V[k === 'echo' ? t : k]);
  return { role, kind: 'first', slot: hopAnswer(value), target: learnerReply(world, t, value) };
}

/** The shared tokenizer: merges from every question and every note and answer of every value, each value one token. */
export function hopsTokenizer(): TinyTokenizer {
  const texts = allHopRows().map((r) => r.question);
  for (const vs of Object.values(V)) for (const v of vs) texts.push(...Array.from({ length: 8 }, () => hopAnswer(v)));
  const prompts = [HOPS_PROMPT_FILE.system.distill, ...Object.values(HOPS_PROMPT_FILE.templates)];
  const tok = buildTinyTokenizer({ merges: 400, corpus: [...prompts, ...texts].join('\n'), digitGroups: true });
  const tokenizerConfig = { ...tok.tokenizerConfig, chat_template: DISTILL_CHAT_TEMPLATE };
  return { ...tok, chatTemplate: DISTILL_CHAT_TEMPLATE, tokenizerConfig };
}

/** The rendered prompt of a role (generation prompt included) with `slot` as the text of its slot. */
export function hopsPrompt(tok: Tokenizer, role: DistillRole, kind: PromptKind, question: string, slot: string): string {
  let user = userPrompt('distill', role, kind, { question, task: 'math', round: kind === 'first' ? 1 : 2 }, HOPS_PROMPTS);
  for (const s of Object.values(SLOTS)) user = user.replace(s, () => slot);
  return renderChat(tok, HOPS_PROMPTS.system.distill, user);
}

/** A role's training chats (ids + target mask); a pure function of `seed`. */
export function hopsExamples(tok: Tokenizer, role: DistillRole, rows: readonly HopRow[], count: number, seed: number) {
  const rng = new Rng(seed);
  const world = hopWorld();
  const enc = (text: string) => tok.encode(text, { addSpecialTokens: false });
  return Array.from({ length: count }, () => {
    const row = rows[rng.int(rows.length)]!;
    const turn = hopsTurn(world, role, row, rng);
    // the latent path tokenises the pieces around a slot apart (docs/method.md §4.2), which splits merges such as
    // "}\n" that the whole text makes, and the text baseline tokenises the whole prompt: half of the chats with a
    // filled slot are tokenised each way
    const marker = role === 'expert' ? SLOTS.distillFeedback : SLOTS.distillExpert;
    const pieces = turn.slot !== '' && rng.int(2) === 0;
    const prompt = pieces
      ? hopsPrompt(tok, role, turn.kind, row.question, marker)
          .split(marker)
          .flatMap((piece, i) => [...(i ? enc(turn.slot) : []), ...enc(piece)])
      : enc(hopsPrompt(tok, role, turn.kind, row.question, turn.slot));
    const target = enc(`${turn.target}<|im_end|>`);
    return { ids: [...prompt, ...target], lossMask: [...prompt.map(() => 0), ...target.map(() => 1)] };
  });
}

/** Trains one agent and writes OUT/<role>/. */
export async function trainHopsAgent(
  spec: DistillAgentSpec,
  o: { out: string; seed?: number; steps?: number; backend?: Backend; log?: (s: string) => void },
): Promise<{ dir: string; losses: number[]; seconds: number; params: number }> {
  const dir = join(o.out, spec.role);
  const configJson = await writeAgentFiles(dir, spec, hopsTokenizer());
  const config = parseDecoderConfig(`${JSON.stringify(configJson)}\n`, join(dir, 'config.json'));
  const tok = await loadTokenizerFromDir(dir);
  const seed = (o.seed ?? HOPS_AGENT_DEFAULTS.seed) * 1000 + HOPS_ROLES.indexOf(spec.role);
  const data = hopsExamples(tok, spec.role, hopSplit('train'), HOPS_AGENT_DEFAULTS.chats, seed + 100);
  const steps = o.steps ?? spec.steps;
  const log = o.log ?? ((s: string) => process.stdout.write(`${s}\n`));
  const { decoder, params } = createTrainableDecoder(config, o.backend ?? new CpuBackend('f32'), { seed });
  const losses: number[] = [];
  const stop = new AbortController();
  const t0 = performance.now();
  try {
    const optimizer = new AdamW([params], { weightDecay: 0.01 });
    optimizer.zeroGrad();
    const { batchSize, warmup } = HOPS_AGENT_DEFAULTS;
    const loop = { maxSteps: steps, batchSize, gradAccumSteps: 1, lr: spec.lr, scheduler: 'cosine' as const, seed, shuffle: true };
    await trainLoop(
      data.length,
      { ...loop, warmupSteps: Math.min(warmup, steps - 1), saveSteps: 0 },
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
          every: HOPS_AGENT_DEFAULTS.logEvery,
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
  return { dir, losses, seconds: (performance.now() - t0) / 1000, params: params.entries.reduce((s, e) => s + e.numel, 0) };
}
