/**
 * The outer links' first stage (ours; upstream starts them from PyTorch's default init): each outer link
 * learns, with both agents and their inner links frozen, to send the receiver what the sender's latent
 * thought stands for. Per training row the sender rolls out m latent steps from its prompt as inference does;
 * at step t the target is the receiver's input embedding of the token the sender would write there,
 * argmax(lm_head(h_t)), and the loss the mean squared error between Outer(Inner(h_t)) and it. This is the
 * inner link's objective carried across the two models (they share one tokenizer, so a token means the same to
 * both). `rmas train-outer --init_outer` then trains the links further with upstream's cross-entropy.
 *
 *   outer_el: the expert's rollout from its first prompt → the learner's embeddings;
 *   outer_le: the learner's rollout from its prompt with the expert's note in its slot → the expert's embeddings.
 *
 *   npx tsx scripts/tiny-distillation/build.ts align --system DIR --out DIR [--steps N] [--seed S] [--losses FILE]
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { F, noGrad, Tape } from '../../src/autograd/index.ts';
import { AdamW } from '../../src/autograd/ops/optim.ts';
import { priceSplit, type PriceRow } from '../../src/eval/tiny-prices.ts';
import { InnerLink, OuterLink } from '../../src/mas/links.ts';
import { latentRollout } from '../../src/mas/rollout.ts';
import { outerManifests, readLinkFile, writeLinkFile } from '../../src/mas/upstream.ts';
import type { Decoder } from '../../src/model/decoder.ts';
import { loadDecoderFromDir } from '../../src/model/dir.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { loadTokenizerFromDir } from '../../src/tokenizer/index.ts';
import type { Tokenizer } from '../../src/tokenizer/tokenizer.ts';
import { lrFactor } from '../../src/train/schedule.ts';
import { Rng } from '../../src/util/rng.ts';
import { distillPrompt, type DistillRole } from './agents.ts';

export const ALIGN_DEFAULTS = { steps: 600, batchSize: 8, lr: 3e-3, warmup: 20 } as const;

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
async function pairs(from: Agent, to: Agent, role: DistillRole, rows: readonly PriceRow[], m: number) {
  const out: { x: Float32Array; y: Float32Array }[] = [];
  for (const row of rows) {
    const slot = role === 'learner' ? row.distill_expert : '';
    const ids = from.tokenizer.encode(distillPrompt(from.tokenizer, role, 'first', row.question, slot), { addSpecialTokens: false });
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

export interface AlignResult {
  losses: Record<'outer_el' | 'outer_le', number[]>;
  seconds: number;
}

/** Trains outer_el and outer_le by alignment and writes them with their manifests to `out`. */
export async function alignOuter(o: {
  system: string;
  out: string;
  seed: number;
  m: number;
  steps?: number;
  stopAfter?: number;
  log?: (s: string) => void;
}): Promise<AlignResult> {
  const t0 = performance.now();
  const be = new CpuBackend('f32');
  const steps = o.steps ?? ALIGN_DEFAULTS.steps;
  const log = o.log ?? ((s: string) => process.stderr.write(`${s}\n`));
  const expert = await loadAgent(join(o.system, 'expert'), be);
  const learner = await loadAgent(join(o.system, 'learner'), be);
  const rows = priceSplit('train');
  const losses: AlignResult['losses'] = { outer_el: [], outer_le: [] };
  const links: OuterLink[] = [];
  try {
    const plan = [
      { key: 'outer_el' as const, from: expert, to: learner, role: 'expert' as const },
      { key: 'outer_le' as const, from: learner, to: expert, role: 'learner' as const },
    ];
    for (const [i, p] of plan.entries()) {
      const data = await pairs(p.from, p.to, p.role, rows, o.m);
      const dIn = p.from.decoder.config.hidden;
      const dOut = p.to.decoder.config.hidden;
      const link = OuterLink.create(be, dIn, dOut, { seed: o.seed * 100 + i, name: p.key });
      links.push(link);
      const opt = new AdamW([link.params], { weightDecay: 0 });
      const rng = new Rng(o.seed * 1000 + i);
      const { batchSize, lr, warmup } = ALIGN_DEFAULTS;
      for (let step = 1; step <= Math.min(steps, o.stopAfter ?? steps); step++) {
        const batch = Array.from({ length: batchSize }, () => data[rng.int(data.length)]!);
        const cat = (k: 'x' | 'y', d: number) => {
          const all = new Float32Array(batchSize * o.m * d);
          batch.forEach((b, j) => all.set(b[k], j * o.m * d));
          return be.fromBytes(new Uint8Array(all.buffer), [batchSize * o.m, d], 'f32');
        };
        const x = cat('x', dIn);
        const y = cat('y', dOut);
        const tape = new Tape();
        try {
          opt.zeroGrad();
          const loss = tape.run(() => F.mseLoss(link.forward(x), y));
          losses[p.key].push((await loss.read())[0]!);
          await tape.backward(loss);
          opt.gather();
          // step is 1-based here; the schedule counts completed steps from 0, as the training loop does
          opt.step(lr * lrFactor('cosine', step - 1, warmup, steps)).dispose();
        } finally {
          tape.dispose();
          x.dispose();
          y.dispose();
        }
        if (step % 100 === 0 || step === steps) {
          const recent = losses[p.key].slice(-100);
          log(`align ${p.key} step ${step}/${steps} mse ${(recent.reduce((a, b) => a + b, 0) / recent.length).toFixed(5)}`);
        }
      }
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

