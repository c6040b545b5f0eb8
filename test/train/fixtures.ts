/** Synthetic training rows and tiny-system jobs shared by the training tests. */
import { InnerLink, OuterLink } from '../../src/mas/links';
import { getStyle } from '../../src/mas/styles';
import { readLinkFile } from '../../src/mas/upstream';
import { loadDecoderFromDir } from '../../src/model';
import type { Backend } from '../../src/tensor/backend';
import { Rng } from '../../src/util/rng';
import { loadTokenizerFromDir } from '../../src/tokenizer';
import type { Row } from '../../src/train/data';
import { createInnerJob, createOuterJob } from '../../src/train/jobs';

/** Arithmetic rows in Sequential-Math's columns (question, plan, refined_plan, answer); deterministic. */
export function arithmeticRows(n: number, seed = 7): Row[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => {
    const a = 1 + rng.int(20);
    const b = 1 + rng.int(20);
    return {
      question: `What is ${a} + ${b}?`,
      plan: `Step 1: add ${a} and ${b}.`,
      refined_plan: `Step 1: add ${a} and ${b}. Step 2: box it.`,
      answer: `${a + b}. \\boxed{${a + b}}`,
    };
  });
}

export async function innerJob(be: Backend, rows: Row[], opts: { seed?: number; lr?: number } = {}) {
  const dir = 'models/tiny/qwen3-tiny';
  const decoder = await loadDecoderFromDir(dir, be);
  const link = InnerLink.create(be, decoder.config.hidden, { seed: opts.seed ?? 3, name: 'planner inner' });
  const job = createInnerJob({
    decoder, tokenizer: await loadTokenizerFromDir(dir), link, rows, shape: 'chain', role: 'planner', task: 'math', maxLength: 256,
    weights: { cos: 1, mse: 0 }, optimizer: { weightDecay: 0.01, maxGradNorm: 1 },
  });
  return { job, link, dispose: () => (link.dispose(), decoder.dispose()) };
}

/** The tiny sequential system of the golden files (torch-saved inner links frozen), fresh outer links. */
export async function outerJob(be: Backend, rows: Row[], opts: { rounds?: number; seed?: number } = {}) {
  const style = getStyle('sequential_light');
  const models = { planner: 'qwen3-tiny', critic: 'llama-tiny', solver: 'qwen2-tiny' } as const;
  const agents = new Map();
  const disposers: (() => void)[] = [];
  for (const [role, m] of Object.entries(models)) {
    const decoder = await loadDecoderFromDir(`models/tiny/${m}`, be);
    const inner = InnerLink.fromStateDict(be, await readLinkFile(`test/golden/tiny-mas/${role}-inner.pt`), {
      name: `${role} inner`,
    }).freeze();
    disposers.push(() => (inner.dispose(), decoder.dispose()));
    agents.set(role, { decoder, inner, tokenizer: await loadTokenizerFromDir(`models/tiny/${m}`) });
  }
  const outer = new Map<string, OuterLink>();
  for (const [i, l] of style.links.entries()) {
    const link = OuterLink.create(be, agents.get(l.from).decoder.config.hidden, agents.get(l.to).decoder.config.hidden, {
      seed: (opts.seed ?? 5) * 10 + i,
      name: l.key,
    });
    disposers.push(() => link.dispose());
    outer.set(l.key, link);
  }
  const job = createOuterJob({
    style, agents, outer, rows, task: 'math', batchSize: 2, optimizer: { maxGradNorm: 1 },
    loss: { rounds: opts.rounds ?? 1, maxLatentTokens: 6, superviseFinalOnly: true, nonLastLossWeight: 0.1, maxLength: 512 },
  });
  return { job, outer, dispose: () => disposers.reverse().forEach((d) => d()) };
}

/** The read-back tests' setup: the qwen3 tiny decoder, a fresh inner link and a random sample whose span starts at P. */
export async function readBackSetup(be: Backend, o: { linkSeed: number; rowSeed: number; T: number; P: number }) {
  const decoder = await loadDecoderFromDir('models/tiny/qwen3-tiny', be);
  const link = InnerLink.create(be, decoder.config.hidden, { seed: o.linkSeed, name: 'readback' });
  const rng = new Rng(o.rowSeed);
  const ex = {
    ids: Array.from({ length: o.T }, () => rng.int(decoder.config.vocabSize)),
    lossMask: Array.from({ length: o.T }, (_, t) => (t >= o.P ? 1 : 0)),
  };
  return { decoder, link, ex, P: o.P, T: o.T };
}

/** Mean cross-entropy of logit rows [n, V] (flat) against `targets`, in f64 in JS. */
export function meanCrossEntropy(logits: ArrayLike<number>, V: number, targets: readonly number[]): number {
  let sum = 0;
  targets.forEach((g, k) => {
    const row = Array.from({ length: V }, (_, j) => logits[k * V + j]!);
    const max = Math.max(...row);
    sum += max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0)) - row[g]!;
  });
  return sum / targets.length;
}

/**
 * Checks a link's gradients against central differences of `loss` at `picks` random coordinates of each
 * named tensor; returns how many were checked. The losses carry f32-level rounding (~1e-7), so the step
 * is large and the bound loose; a wrong gradient (a missed path, a sign, a dropped row) is off by far more.
 */
export async function checkLinkGrads(
  link: InnerLink,
  names: readonly string[],
  loss: () => Promise<number>,
  o: { seed: number; picks?: number; eps?: number },
) {
  const grads = await link.params.export('grad');
  const values = await link.params.export('data');
  const rng = new Rng(o.seed);
  const eps = o.eps ?? 1e-2;
  const { expect } = await import('vitest');
  let checked = 0;
  for (const name of names) {
    const g = grads.get(name)!;
    for (let k = 0; k < (o.picks ?? 3); k++) {
      const i = rng.int(g.length);
      const at = (delta: number) => {
        const v = Float64Array.from(values.get(name)!);
        v[i] += delta;
        link.params.import(new Map([[name, v]]), { partial: true });
      };
      at(eps);
      const up = await loss();
      at(-eps);
      const down = await loss();
      at(0);
      const fd = (up - down) / (2 * eps);
      expect(Math.abs(g[i]! - fd), `${name}[${i}]: ${g[i]} vs ${fd}`).toBeLessThan(5e-4 * Math.abs(fd) + 5e-5);
      checked++;
    }
  }
  return checked;
}
