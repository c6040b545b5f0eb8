/**
 * Training jobs: the data and models of one run turned into what trainLoop needs (a runBatch, an
 * optimizer, the checkpoint content and, for --dump_batches, the exact inputs of each step). Platform
 * neutral: models, tokenizers and rows come in already loaded (files in the runner, IndexedDB in the tab).
 *
 * Inner (docs/method.md §6.1): one role's inner link on its frozen model. Outer (docs/method.md §6.2): every outer link of a style, the
 * agents' inner links frozen. Rows that cannot be tokenised are skipped and counted by reason.
 */
import { F, noGrad } from '../autograd';
import { AdamW, type AdamWOptions } from '../autograd/ops/optim';
import type { StTensor } from '../formats/safetensors';
import type { InnerLink, OuterLink } from '../mas/links';
import type { PromptSet, TaskKind } from '../mas/prompts';
import { schedule, type StyleSpec } from '../mas/styles';
import type { Decoder } from '../model/decoder';
import type { Tensor } from '../tensor/tensor';
import type { Tokenizer } from '../tokenizer';
import { innerExample, rowTask, stageExample, type Row } from './data';
import { innerPairs, innerSampleStep, type InnerExample, type InnerLossWeights } from './inner';
import type { BatchResult, BatchShard } from './loop';
import { outerSampleStep, stageKey, type OuterAgent, type OuterLossOptions, type OuterSample } from './outer';

export interface TrainJob {
  kind: 'inner' | 'outer';
  /** Usable samples after tokenisation. */
  size: number;
  /** Rows dropped while tokenising, by reason. */
  dropped: Record<string, number>;
  /** Rows kept with a caveat worth reporting, by reason. */
  notes: Record<string, number>;
  optimizer: AdamW;
  links: ReadonlyMap<string, InnerLink | OuterLink>;
  /** This rank's samples of a micro-batch; normalisers span `shard.global` (trainLoop's LoopHooks.runBatch). */
  runBatch(indices: number[], scale: number, shard: BatchShard): Promise<BatchResult>;
  /** What a batch feeds the models, for --dump_batches (prefix distinguishes micro-batches). */
  batchTensors(indices: number[], prefix: string): Record<string, StTensor>;
}

const add = (m: Record<string, number>, k: string, n = 1) => (m[k] = (m[k] ?? 0) + n);
const i32 = (values: readonly number[], shape: number[]): StTensor => ({
  dtype: 'I32',
  shape,
  bytes: new Uint8Array(Int32Array.from(values).buffer),
});

export interface InnerJobConfig {
  decoder: Decoder;
  tokenizer: Tokenizer;
  link: InnerLink;
  rows: readonly Row[];
  shape: StyleSpec['shape'];
  role: string;
  /** Task of rows without a task_family column (--mas_task). */
  task: TaskKind;
  maxLength: number;
  weights: InnerLossWeights;
  optimizer: AdamWOptions;
  prompts?: PromptSet;
}

export function createInnerJob(c: InnerJobConfig): TrainJob & { examples: InnerExample[] } {
  const examples: InnerExample[] = [];
  const dropped: Record<string, number> = {};
  const notes: Record<string, number> = {};
  for (const row of c.rows) {
    const t = rowTask(row, c.task);
    const ex = innerExample(c.tokenizer, c.shape, c.role, 'first', row, {
      task: t.task,
      maxLength: c.maxLength,
      ...(c.prompts ? { prompts: c.prompts } : {}),
    });
    if ('skip' in ex) add(dropped, ex.skip);
    else if (innerPairs(ex) === 0) add(dropped, 'no_target_pairs');
    else {
      // the template renders the prompt differently without the generation prompt (docs/method.md §12.7): the mask
      // goes by the prompt's length, as upstream's does
      if (!ex.promptIsPrefix) add(notes, 'prompt_not_prefix_of_full_chat');
      examples.push({ ids: ex.ids, lossMask: ex.lossMask });
    }
  }
  const optimizer = new AdamW([c.link.params], c.optimizer);
  return {
    kind: 'inner', size: examples.length, dropped, notes, optimizer, examples, links: new Map([['adapter', c.link]]),
    async runBatch(indices, scale, shard) {
      const batch = indices.map((i) => examples[i]);
      // the masked means span the whole batch, every rank's samples (each rank tokenised them all)
      const pairs = shard.global.reduce((n, i) => n + innerPairs(examples[i]), 0);
      // the batch's masked means, scaled by 1 / gradient-accumulation steps
      let total: Tensor | null = null;
      for (const ex of batch) {
        const l = await innerSampleStep(c.decoder, c.link, ex, c.weights, pairs / scale);
        const prev: Tensor | null = total;
        total = prev ? noGrad(() => F.add(prev, l)) : l;
        if (prev) { prev.dispose(); l.dispose(); }
      }
      optimizer.gather();
      const loss = (await total!.read())[0] / scale;
      total!.dispose();
      return { loss, tokens: batch.reduce((n, e) => n + e.ids.length, 0), valid: batch.length, skipped: {} };
    },
    batchTensors(indices, prefix) {
      // as upstream's collate: left-padded rows (pad = eos), attention_mask 0 on the padding
      const batch = indices.map((i) => examples[i]);
      const T = Math.max(...batch.map((e) => e.ids.length));
      const pad = c.tokenizer.eosTokenIds[0] ?? 0;
      const rows = (f: (e: InnerExample, t: number) => number, padValue: number) =>
        batch.flatMap((e) => Array.from({ length: T }, (_, t) => (t < T - e.ids.length ? padValue : f(e, t - (T - e.ids.length)))));
      return {
        [`${prefix}input_ids`]: i32(rows((e, t) => e.ids[t], pad), [batch.length, T]),
        [`${prefix}attention_mask`]: i32(rows(() => 1, 0), [batch.length, T]),
        [`${prefix}loss_mask`]: i32(rows((e, t) => e.lossMask[t], 0), [batch.length, T]),
      };
    },
  };
}

export interface OuterJobConfig {
  style: StyleSpec;
  agents: ReadonlyMap<string, OuterAgent & { tokenizer: Tokenizer }>;
  outer: ReadonlyMap<string, OuterLink>;
  rows: readonly Row[];
  task: TaskKind;
  loss: OuterLossOptions;
  batchSize: number;
  optimizer: AdamWOptions;
  prompts?: PromptSet;
  /**
   * Score each target only up to its agent's first end-of-turn token (ours; upstream scores the whole rendered
   * turn). A chat template's tokens after the end of the turn ('\n' after <|im_end|>) are never generated, and an
   * agent trained on text that stops there cannot predict them: their cross-entropy, not the answer's, then drives
   * the links (tiny_distillation: 6.3 nats of its 6.3 on a right answer).
   */
  untilEos?: boolean;
}

export function createOuterJob(c: OuterJobConfig): TrainJob & { samples: OuterSample[] } {
  const samples: OuterSample[] = [];
  const dropped: Record<string, number> = {};
  const stages = schedule(c.style, c.loss.rounds);
  for (const row of c.rows) {
    const t = rowTask(row, c.task);
    const sample = new Map<string, { pieces: number[][]; target: number[] }>();
    let skip: string | null = null;
    for (const st of stages) {
      const ex = stageExample(c.agents.get(st.role)!.tokenizer, c.style.shape, st.role, st.kind, row, {
        task: t.task,
        round: st.round + 1,
        ...(c.prompts ? { prompts: c.prompts } : {}),
      });
      if ('skip' in ex) { skip = ex.skip; break; }
      const eos = c.agents.get(st.role)!.tokenizer.eosTokenIds;
      const end = c.untilEos ? ex.target.findIndex((id) => eos.includes(id)) : -1;
      sample.set(stageKey(st.round, st.role), { pieces: ex.pieces, target: end >= 0 ? ex.target.slice(0, end + 1) : ex.target });
    }
    if (skip) add(dropped, skip);
    else samples.push(sample);
  }
  const keys = [...c.outer.keys()];
  const optimizer = new AdamW(keys.map((k) => c.outer.get(k)!.params), c.optimizer);
  return {
    kind: 'outer', size: samples.length, dropped, notes: {}, optimizer, samples, links: c.outer,
    async runBatch(indices, scale, shard) {
      let loss = 0;
      let tokens = 0;
      let valid = 0;
      const skipped: Record<string, number> = {};
      const batch = shard.global.length;
      for (const i of indices) {
        const r = await outerSampleStep(c.style, c.agents, c.outer, samples[i], c.loss, scale / batch);
        if ('skip' in r) { add(skipped, r.skip); continue; }
        valid++;
        loss += r.loss;
        tokens += r.tokens;
      }
      // upstream rescales by batch / valid when samples were skipped (valid samples of every rank)
      const [all] = await shard.sum([valid]);
      if (all > 0) optimizer.gather(batch / all);
      return { loss: all ? loss / all : 0, tokens, valid, skipped };
    },
    batchTensors(indices, prefix) {
      // per sample and stage: the prompt pieces around the slots, the gold target, how many latents each
      // slot receives, and the positions of the target tokens in the stage's sequence (scored by
      // cross-entropy for the final agent, collected as latents for the others)
      const out: Record<string, StTensor> = {};
      for (const [n, i] of indices.entries()) {
        const lens = new Map<string, number>();
        for (const st of stages) {
          const s = samples[i].get(stageKey(st.round, st.role))!;
          const p = `${prefix}sample${n}.round${st.round + 1}.${st.role}.`;
          const slotLens = st.fill.map(([, key]) => lens.get(key) ?? 0);
          const rest = s.pieces.slice(1).reduce((a, x) => a + x.length, 0) + slotLens.reduce((a, x) => a + x, 0) + s.target.length;
          const first = Math.max(0, Math.min(s.pieces[0].length, c.loss.maxLength - rest));
          const pieces = [s.pieces[0].slice(s.pieces[0].length - first), ...s.pieces.slice(1)];
          pieces.forEach((ids, k) => (out[`${p}ids.${k}`] = i32(ids, [ids.length])));
          out[`${p}target`] = i32(s.target, [s.target.length]);
          out[`${p}slot_lens`] = i32(slotLens, [slotLens.length]);
          const T = first + rest;
          out[`${p}label_positions`] = i32(Array.from({ length: s.target.length }, (_, k) => T - s.target.length + k), [s.target.length]);
          for (const key of st.linksOut)
            lens.set(key, c.loss.latents === 'rollout' ? c.loss.maxLatentTokens : Math.min(c.loss.maxLatentTokens, s.target.length));
        }
      }
      return out;
    },
  };
}
