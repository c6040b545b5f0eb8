/**
 * The recursion system's outer-link alignment, the distillation build's (scripts/tiny-distillation/align-outer.ts)
 * on every round's prompts: Outer(Inner(h_t)) of a sender's latent rollout learns the receiver's embedding of the
 * token argmax(lm_head(h_t)), agents and inner links frozen. The senders' prompts are those of the gold 3-round
 * transcripts (agents.ts goldTranscript): the expert's first and feedback prompts, the learner's prompts with each
 * round's note, so the links see the slots of the later rounds as well as the first hand-off.
 *
 *   npx tsx scripts/tiny-recursion/build.ts align --system DIR --out DIR [--steps N] [--seed S] [--losses FILE]
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { F, noGrad, Tape } from '../../src/autograd/index.ts';
import type { FlatParams } from '../../src/autograd/params.ts';
import { AdamW } from '../../src/autograd/ops/optim.ts';
import { goldTranscript, hopSplit, hopWorld } from '../../src/eval/tiny-hops.ts';
import { InnerLink, OuterLink } from '../../src/mas/links.ts';
import { latentRollout } from '../../src/mas/rollout.ts';
import { outerManifests, readLinkFile, writeLinkFile } from '../../src/mas/upstream.ts';
import type { Decoder } from '../../src/model/decoder.ts';
import { loadDecoderFromDir } from '../../src/model/dir.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import type { Tensor } from '../../src/tensor/tensor.ts';
import { loadTokenizerFromDir } from '../../src/tokenizer/index.ts';
import type { Tokenizer } from '../../src/tokenizer/tokenizer.ts';
import { lrFactor } from '../../src/train/schedule.ts';
import { Rng } from '../../src/util/rng.ts';
import type { DistillRole } from '../tiny-distillation/agents.ts';
import { hopsPrompt } from './agents.ts';

export const HOPS_ALIGN_DEFAULTS = { steps: 600, batchSize: 8, lr: 3e-3, warmup: 20, rowsPerRole: 600 } as const;

/** A sender's prompts: every stage of a role in the gold 3-round transcripts of the train rows, deduplicated, seeded sample. */
function senderPrompts(role: DistillRole, count: number, seed: number): { question: string; kind: 'first' | 'feedback'; slot: string }[] {
  const world = hopWorld();
  const seen = new Map<string, { question: string; kind: 'first' | 'feedback'; slot: string }>();
  for (const row of hopSplit('train'))
    for (const st of goldTranscript(world, row, 3).filter((s) => s.role === role)) {
      const p = { question: row.question, kind: st.kind as 'first' | 'feedback', slot: st.slot };
      seen.set(JSON.stringify(p), p);
    }
  const all = [...seen.values()];
  const rng = new Rng(seed);
  for (let i = all.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [all[i], all[j]] = [all[j]!, all[i]!];
  }
  return all.slice(0, count);
}

interface Agent {
  decoder: Decoder;
  tokenizer: Tokenizer;
  inner: InnerLink;
}

async function loadAgent(dir: string, be: Backend): Promise<Agent> {
  const decoder = await loadDecoderFromDir(dir, be);
  const inner = InnerLink.fromStateDict(be, await readLinkFile(join(dir, 'adapter.pt')), { d: decoder.config.hidden }).freeze();
  return { decoder, tokenizer: await loadTokenizerFromDir(dir), inner };
}

/** Per row: Inner(H) of the sender's rollout [m, d_in] and the receiver's embeddings of its tokens [m, d_out], on the host. */
async function pairs(from: Agent, to: Agent, role: DistillRole, prompts: ReturnType<typeof senderPrompts>, m: number) {
  const out: { x: Float32Array; y: Float32Array }[] = [];
  for (const p of prompts) {
    const ids = from.tokenizer.encode(hopsPrompt(from.tokenizer, role, p.kind, p.question, p.slot), { addSpecialTokens: false });
    const H = await latentRollout(from.decoder, from.inner, [ids], m);
    const [x, logits] = noGrad(() => [from.inner.forward(H), F.linear(H, from.decoder.weights.lmHead)]);
    const v = await logits.read();
    const V = logits.shape[1]!;
    const tokens = Array.from({ length: m }, (_, i) => {
      let best = 0;
      for (let j = 1; j < V; j++) if (v[i * V + j]! > v[i * V + best]!) best = j;
      return best;
    });
    const ids2 = to.decoder.backend.fromBytes(new Uint8Array(new Int32Array(tokens).buffer), [m], 'i32');
    const y = noGrad(() => to.decoder.embed(ids2));
    out.push({ x: await x.read(), y: await y.read() });
    for (const t of [H, x, logits, ids2, y]) t.dispose();
  }
  return out;
}

/**
 * AdamW (no weight decay) on `params` over seeded batches of `schedule.batchSize` rows of `data`, each row m = `rows`
 * vectors: `loss(x, y)` of the stacked [B·m, d] inputs and targets, the learning rate on the cosine schedule of
 * `steps` (warmup included), stopping after `stopAfter` steps when given. Returns the losses, one per step; `onStep`
 * sees each step's number (from 1) and the losses so far. The alignment and the realignment (realign.ts) fit with it.
 */
export async function fitRows(o: {
  params: FlatParams;
  data: readonly { x: Float32Array; y: Float32Array }[];
  dims: [number, number];
  rows: number;
  steps: number;
  stopAfter?: number;
  schedule: { batchSize: number; lr: number; warmup: number };
  rng: Rng;
  be: Backend;
  loss: (x: Tensor, y: Tensor) => Tensor;
  onStep?: (step: number, losses: readonly number[]) => void;
}): Promise<number[]> {
  const { batchSize, lr, warmup } = o.schedule;
  const opt = new AdamW([o.params], { weightDecay: 0 });
  const losses: number[] = [];
  for (let step = 1; step <= Math.min(o.steps, o.stopAfter ?? o.steps); step++) {
    const batch = Array.from({ length: batchSize }, () => o.data[o.rng.int(o.data.length)]!);
    const cat = (k: 'x' | 'y', d: number) => {
      const all = new Float32Array(batchSize * o.rows * d);
      batch.forEach((b, j) => all.set(b[k], j * o.rows * d));
      return o.be.fromBytes(new Uint8Array(all.buffer), [batchSize * o.rows, d], 'f32');
    };
    const x = cat('x', o.dims[0]);
    const y = cat('y', o.dims[1]);
    const tape = new Tape();
    try {
      opt.zeroGrad();
      const loss = tape.run(() => o.loss(x, y));
      losses.push((await loss.read())[0]!);
      await tape.backward(loss);
      opt.gather();
      // step is 1-based here; the schedule counts completed steps from 0, as the training loop does
      opt.step(lr * lrFactor('cosine', step - 1, warmup, o.steps)).dispose();
    } finally {
      tape.dispose();
      x.dispose();
      y.dispose();
    }
    o.onStep?.(step, losses);
  }
  return losses;
}

export interface AlignResult {
  losses: Record<'outer_el' | 'outer_le', number[]>;
  seconds: number;
}

/** Trains outer_el and outer_le by alignment (on every round's prompts) and writes them with their manifests to `out`. */
export async function alignHopsOuter(o: {
  system: string;
  out: string;
  seed: number;
  m: number;
  steps?: number;
  /** Sender prompts per role (default HOPS_ALIGN_DEFAULTS.rowsPerRole). */
  rows?: number;
  stopAfter?: number;
  log?: (s: string) => void;
}): Promise<AlignResult> {
  const t0 = performance.now();
  const be = new CpuBackend('f32');
  const steps = o.steps ?? HOPS_ALIGN_DEFAULTS.steps;
  const log = o.log ?? ((s: string) => process.stderr.write(`${s}\n`));
  const expert = await loadAgent(join(o.system, 'expert'), be);
  const learner = await loadAgent(join(o.system, 'learner'), be);
  const losses: AlignResult['losses'] = { outer_el: [], outer_le: [] };
  const links: OuterLink[] = [];
  try {
    const plan = [
      { key: 'outer_el' as const, from: expert, to: learner, role: 'expert' as const },
      { key: 'outer_le' as const, from: learner, to: expert, role: 'learner' as const },
    ];
    for (const [i, p] of plan.entries()) {
      const data = await pairs(p.from, p.to, p.role, senderPrompts(p.role, o.rows ?? HOPS_ALIGN_DEFAULTS.rowsPerRole, o.seed + i), o.m);
      const dIn = p.from.decoder.config.hidden;
      const dOut = p.to.decoder.config.hidden;
      const link = OuterLink.create(be, dIn, dOut, { seed: o.seed * 100 + i, name: p.key });
      links.push(link);
      const { batchSize, lr, warmup } = HOPS_ALIGN_DEFAULTS;
      await fitRows({
        params: link.params,
        data,
        dims: [dIn, dOut],
        rows: o.m,
        steps,
        stopAfter: o.stopAfter,
        schedule: { batchSize, lr, warmup },
        rng: new Rng(o.seed * 1000 + i),
        be,
        loss: (x, y) => F.mseLoss(link.forward(x), y),
        onStep: (step, all) => {
          losses[p.key].push(all[all.length - 1]!);
          if (step % 100 === 0 || step === steps) {
            const recent = losses[p.key].slice(-100);
            log(`align ${p.key} step ${step}/${steps} mse ${(recent.reduce((a, b) => a + b, 0) / recent.length).toFixed(5)}`);
          }
        },
      });
    }
    await mkdir(o.out, { recursive: true });
    for (const link of links) await writeLinkFile(link, join(o.out, `${link.name}.pt`));
    const m = outerManifests(
      'distill',
      links.map((l) => ({ key: l.name, filename: `${l.name}.pt`, type: l.type, inDim: l.dIn, outDim: l.dOut })),
    );
    await writeFile(join(o.out, 'outerlink_config.json'), `${JSON.stringify(m.outerlinkConfig, null, 2)}\n`);
    await writeFile(join(o.out, 'outer_adapter_config.json'), `${JSON.stringify(m.outerAdapterConfig, null, 2)}\n`);
  } finally {
    for (const l of links) l.dispose();
    for (const a of [expert, learner]) {
      a.decoder.dispose();
      a.inner.dispose();
    }
  }
  return { losses, seconds: (performance.now() - t0) / 1000 };
}

