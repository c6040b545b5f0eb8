/**
 * A second alignment pass (ours, an experiment of issue 40): align.ts fits each outer link on the states a sender
 * has when its slot holds text; in the running system the learner reads the expert's latent message and the expert
 * the learner's, so their states drift from those. Here the system runs as `ask` does (latent, 3 rounds, greedy),
 * every rollout's states are collected, and on them, per sender:
 *   - the inner link learns Inner(h_t) → the sender's own embedding of argmax(lm_head(h_t)), by cosine plus the
 *     squared error relative to the embeddings' mean square: the inner loop's objective (docs/method.md §6.1) on
 *     the states a rollout visits rather than teacher-forced ones. The inner loop leaves the links' outputs 2–4 times
 *     the embeddings' norm, at a cosine of 0.73 on a note's value token, and the frozen expert, reading that, wrote
 *     a second value where the note's closing brace belongs (`\boxed{six{moss`) in 3 of 4 of its errors;
 *   - then the outer link continues align.ts's objective, Outer(Inner(h_t)) → the receiver's embedding of the same
 *     token, on the new Inner(h_t).
 * Agents stay frozen; each pass runs the system with the previous pass's links.
 *
 *   npx tsx scripts/tiny-recursion/build.ts realign --system DIR --init DIR --out DIR [--rows N] [--steps N] [--passes P]
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { F, noGrad } from '../../src/autograd/index.ts';
import { hopSplit } from '../../src/eval/tiny-hops.ts';
import { ask } from '../../src/mas/ask.ts';
import { loadSystem } from '../../src/mas/system-folders.ts';
import { outerManifests, writeLinkFile } from '../../src/mas/upstream.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import type { Tensor } from '../../src/tensor/tensor.ts';
import { Rng } from '../../src/util/rng.ts';
import { fitRows } from './align.ts';

export const REALIGN_DEFAULTS = { rows: 300, steps: 600, passes: 2, batchSize: 8, lr: 1e-3, warmup: 20 } as const;

type Role = 'expert' | 'learner';

/** One rollout: its states H [m, d_from], the sender's and the receiver's embeddings of their argmax tokens. */
interface Rollout {
  h: Float32Array;
  own: Float32Array;
  recv: Float32Array;
}

/** Mean square of an agent's embedding table: the unit of the inner fit's squared error (and the inner loop's, build.ts). */
export async function meanSquare(t: Tensor): Promise<number> {
  const v = await t.read();
  let sq = 0;
  for (const x of v) sq += x * x;
  return sq / v.length;
}

const tail = (xs: readonly number[]) => {
  const recent = xs.slice(-100);
  return recent.reduce((a, b) => a + b, 0) / recent.length;
};

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
  const steps = o.steps ?? REALIGN_DEFAULTS.steps;
  const { batchSize, lr, warmup } = REALIGN_DEFAULTS;
  const schedule = { batchSize, lr, warmup };
  const system = await loadSystem('tiny_recursion', {
    backend: be,
    embeddedRoot: o.system,
    task: 'math',
    ckptOverride: { outer: o.init },
  });
  const links = { expert: system.outer.get('outer_el')!, learner: system.outer.get('outer_le')! };
  const agent = { expert: system.agents.get('expert')!, learner: system.agents.get('learner')! };
  const receiver = { expert: agent.learner, learner: agent.expert };
  const scale = {
    expert: await meanSquare(agent.expert.decoder.weights.embed),
    learner: await meanSquare(agent.learner.decoder.weights.embed),
  };
  const losses: Record<string, number[]> = { outer_el: [], outer_le: [], inner_expert: [], inner_learner: [] };
  const rng = new Rng(o.seed * 7919);
  try {
    for (let pass = 0; pass < (o.passes ?? REALIGN_DEFAULTS.passes); pass++) {
      const data: Record<Role, Rollout[]> = { expert: [], learner: [] };
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
            const role: Role = rec.role;
            const from = agent[role].decoder;
            const H = rec.hidden;
            const logits = noGrad(() => F.linear(H, from.weights.lmHead));
            const v = await logits.read();
            const V = logits.shape[1]!;
            const tokens = Array.from({ length: H.shape[0]! }, (_, t) => {
              let best = 0;
              for (let j = 1; j < V; j++) if (v[t * V + j]! > v[t * V + best]!) best = j;
              return best;
            });
            const ids = be.fromBytes(new Uint8Array(new Int32Array(tokens).buffer), [tokens.length], 'i32');
            const [own, recv] = noGrad(() => [from.embed(ids), receiver[role].decoder.embed(ids)]);
            data[role].push({ h: await H.read(), own: await own.read(), recv: await recv.read() });
            for (const t of [logits, ids, own, recv]) t.dispose();
          },
        });
      }
      for (const role of ['expert', 'learner'] as const) {
        const inner = agent[role].inner!;
        const link = links[role];
        const key = role === 'expert' ? 'outer_el' : 'outer_le';
        const d = inner.d;
        inner.unfreeze();
        const innerLosses = await fitRows({
          params: inner.params,
          data: data[role].map((r) => ({ x: r.h, y: r.own })),
          dims: [d, d],
          rows: o.m,
          steps,
          schedule,
          rng,
          be,
          loss: (x, y) => {
            const pred = inner.forward(x);
            return F.add(F.cosineLoss(pred, y), F.scale(F.mseLoss(pred, y), 1 / scale[role]));
          },
        });
        inner.freeze();
        losses[`inner_${role}`]!.push(...innerLosses);
        // the outer link's inputs through the new inner link
        const pairs: { x: Float32Array; y: Float32Array }[] = [];
        for (const r of data[role]) {
          const h = be.fromBytes(new Uint8Array(r.h.buffer.slice(0)), [o.m, d], 'f32');
          const x = noGrad(() => inner.forward(h));
          pairs.push({ x: await x.read(), y: r.recv });
          h.dispose();
          x.dispose();
        }
        link.unfreeze();
        const outerLosses = await fitRows({
          params: link.params,
          data: pairs,
          dims: [link.dIn, link.dOut],
          rows: o.m,
          steps,
          schedule,
          rng,
          be,
          loss: (x, y) => F.mseLoss(link.forward(x), y),
        });
        link.freeze();
        losses[key]!.push(...outerLosses);
        const innerFit = `inner ${tail(innerLosses).toFixed(4)} (cosine + relative mse)`;
        log(`realign pass ${pass + 1} ${role}: ${data[role].length} rollouts, ${innerFit}, ${key} mse ${tail(outerLosses).toFixed(5)}`);
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
    for (const role of ['expert', 'learner'] as const) {
      await mkdir(join(o.out, role), { recursive: true });
      await writeLinkFile(agent[role].inner!, join(o.out, role, 'adapter.pt'));
    }
  } finally {
    system.dispose();
  }
  return { losses, seconds: (performance.now() - t0) / 1000 };
}
