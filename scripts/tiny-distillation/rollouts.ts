/**
 * What the expert thinks in each round of a latent run: its rollout's states decoded by argmax(lm_head(h)),
 * compared with the note it would write (the gold distill_expert). Round 1 reads the question alone; later
 * rounds read the question and the learner's latent feedback in the expert's feedback slot, which its text
 * training filled with written answers only.
 *
 *   npx tsx scripts/tiny-distillation/build.ts rollouts [--system DIR] [--split validation|test] [--limit N] [--rounds R]
 */
import { resolve } from 'node:path';
import { F, noGrad } from '../../src/autograd/index.ts';
import { type PriceRow } from '../../src/eval/tiny-prices.ts';
import { ask } from '../../src/mas/ask.ts';
import { defaultLatentSteps, getStyle } from '../../src/mas/styles.ts';
import { loadSystem } from '../../src/mas/system-folders.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { TINY_DISTILLATION_DIR } from '../tiny-system/paths.ts';

/** Per round: rows whose expert rollout decodes to a text that starts with the gold note's price. */
export async function expertRollouts(o: { systemDir?: string; rows: readonly PriceRow[]; rounds: number }) {
  const system = await loadSystem('tiny_distillation', {
    backend: new CpuBackend('f32'),
    embeddedRoot: resolve(o.systemDir ?? TINY_DISTILLATION_DIR),
    task: 'math',
  });
  const m = defaultLatentSteps(getStyle('tiny_distillation'));
  const expert = system.agents.get('expert')!;
  const price = Array.from({ length: o.rounds }, () => 0);
  const note = Array.from({ length: o.rounds }, () => 0);
  const first: string[] = [];
  try {
    for (const row of o.rows) {
      await ask(system, {
        question: row.question,
        task: 'math',
        rounds: o.rounds,
        latentSteps: m,
        sampling: { greedy: true },
        maxNewTokens: 8,
        answerRetry: false,
        onStage: async (rec) => {
          if (rec.role !== 'expert' || !rec.hidden) return;
          const logits = noGrad(() => F.linear(rec.hidden!, expert.decoder.weights.lmHead));
          const v = await logits.read();
          const V = logits.shape[1]!;
          logits.dispose();
          const ids = Array.from({ length: m }, (_, i) => {
            let best = 0;
            for (let j = 1; j < V; j++) if (v[i * V + j]! > v[i * V + best]!) best = j;
            return best;
          });
          const text = expert.tokenizer.decode(ids);
          if (text.startsWith(`${row.price} `)) price[rec.round]!++;
          if (row.distill_expert.startsWith(text.trim())) note[rec.round]!++;
          if (first.length < o.rounds) first.push(text);
        },
      });
    }
  } finally {
    system.dispose();
  }
  return { rows: o.rows.length, price, note, first };
}
