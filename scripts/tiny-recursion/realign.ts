/**
 * A second alignment pass (ours, an experiment of issue 40): align.ts fits each outer link on the states a sender
 * has when its slot holds text; in the running system the learner reads the expert's latent message and the expert
 * the learner's, so their states drift from those. Here the system runs as `ask` does (latent, 3 rounds, greedy),
 * every rollout's states are collected, and each outer link continues the same objective on them: Outer(Inner(h_t))
 * → the receiver's embedding of argmax(lm_head(h_t)). Agents and inner links stay frozen.
 *
 *   npx tsx scripts/tiny-recursion/build.ts realign --system DIR --init DIR --out DIR [--rows N] [--steps N] [--passes P]
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { F, noGrad, Tape } from '../../src/autograd/index.ts';
import { AdamW } from '../../src/autograd/ops/optim.ts';
import { hopSplit } from '../../src/eval/tiny-hops.ts';
import { ask } from '../../src/mas/ask.ts';
import { loadSystem } from '../../src/mas/system-folders.ts';
import { outerManifests, writeLinkFile } from '../../src/mas/upstream.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { lrFactor } from '../../src/train/schedule.ts';
import { Rng } from '../../src/util/rng.ts';

export const REALIGN_DEFAULTS = { rows: 300, steps: 600, passes: 2, batchSize: 8, lr: 1e-3, warmup: 20 } as const;

export async function realignOuter(o: {
  system: string;
  init: string;
  out: string;
  seed: number;
  m: number;
  rows?: number;
  steps?: number;
  passes?: number;
  log?: (s: string) => void;
}) {
  const t0 = performance.now();
  const be = new CpuBackend('f32');
  const log = o.log ?? ((s: string) => process.stderr.write(`${s}\n`));
  const { batchSize, lr, warmup } = REALIGN_DEFAULTS;
  const steps = o.steps ?? REALIGN_DEFAULTS.steps;
  const system = await loadSystem('tiny_recursion', {
    backend: be,
    embeddedRoot: o.system,
    task: 'math',
    ckptOverride: { outer: o.init },
  });
  const links = { expert: system.outer.get('outer_el')!, learner: system.outer.get('outer_le')! };
  const receiver = { expert: system.agents.get('learner')!, learner: system.agents.get('expert')! };
  const losses: Record<string, number[]> = { outer_el: [], outer_le: [] };
  const rng = new Rng(o.seed * 7919);
  try {
    for (let pass = 0; pass < (o.passes ?? REALIGN_DEFAULTS.passes); pass++) {
      const data: Record<'expert' | 'learner', { x: Float32Array; y: Float32Array }[]> = { expert: [], learner: [] };
      const rows = hopSplit('train');
      for (let i = 0; i < (o.rows ?? REALIGN_DEFAULTS.rows); i++) {
        const row = rows[rng.int(rows.length)]!;
        await ask(system, {
          question: row.question,
          task: 'math',
          rounds: 3,
          latentSteps: o.m,
          mode: 'latent',
          sampling: { greedy: true },
          maxNewTokens: 8,
          answerRetry: false,
          onStage: async (rec) => {
            if (!rec.hidden || (rec.role !== 'expert' && rec.role !== 'learner')) return;
            const from = system.agents.get(rec.role)!;
            const H = rec.hidden;
            const [x, logits] = noGrad(() => [from.inner!.forward(H), F.linear(H, from.decoder.weights.lmHead)]);
            const v = await logits.read();
            const V = logits.shape[1]!;
            const tokens = Array.from({ length: H.shape[0]! }, (_, t) => {
              let best = 0;
              for (let j = 1; j < V; j++) if (v[t * V + j]! > v[t * V + best]!) best = j;
              return best;
            });
            const to = receiver[rec.role].decoder;
            const ids = to.backend.fromBytes(new Uint8Array(new Int32Array(tokens).buffer), [tokens.length], 'i32');
            const y = noGrad(() => to.embed(ids));
            data[rec.role].push({ x: await x.read(), y: await y.read() });
            for (const t of [x, logits, ids, y]) t.dispose();
          },
        });
      }
      for (const role of ['expert', 'learner'] as const) {
        const link = links[role];
        const key = role === 'expert' ? 'outer_el' : 'outer_le';
        link.unfreeze();
        const opt = new AdamW([link.params], { weightDecay: 0 });
        for (let step = 1; step <= steps; step++) {
          const batch = Array.from({ length: batchSize }, () => data[role][rng.int(data[role].length)]!);
          const cat = (k: 'x' | 'y', d: number) => {
            const all = new Float32Array(batchSize * o.m * d);
            batch.forEach((b, j) => all.set(b[k], j * o.m * d));
            return be.fromBytes(new Uint8Array(all.buffer), [batchSize * o.m, d], 'f32');
          };
          const x = cat('x', link.dIn);
          const y = cat('y', link.dOut);
          const tape = new Tape();
          try {
            opt.zeroGrad();
            const loss = tape.run(() => F.mseLoss(link.forward(x), y));
            losses[key]!.push((await loss.read())[0]!);
            await tape.backward(loss);
            opt.gather();
            opt.step(lr * lrFactor('cosine', step - 1, warmup, steps)).dispose();
          } finally {
            tape.dispose();
            x.dispose();
            y.dispose();
          }
        }
        link.freeze();
        const recent = losses[key]!.slice(-100);
        const mse = recent.reduce((a, b) => a + b, 0) / recent.length;
        log(`realign pass ${pass + 1} ${key}: ${data[role].length} rollouts, mse ${mse.toFixed(5)}`);
      }
    }
    await mkdir(o.out, { recursive: true });
    const list = [links.expert, links.learner];
    const keys = ['outer_el', 'outer_le'];
    for (const [i, link] of list.entries()) await writeLinkFile(link, join(o.out, `${keys[i]}.pt`));
    const m = outerManifests(
      'distill',
      list.map((l, i) => ({ key: keys[i]!, filename: `${keys[i]}.pt`, type: l.type, inDim: l.dIn, outDim: l.dOut })),
    );
    await writeFile(join(o.out, 'outerlink_config.json'), `${JSON.stringify(m.outerlinkConfig, null, 2)}\n`);
    await writeFile(join(o.out, 'outer_adapter_config.json'), `${JSON.stringify(m.outerAdapterConfig, null, 2)}\n`);
  } finally {
    system.dispose();
  }
  return { losses, seconds: (performance.now() - t0) / 1000 };
}
