/**
 * How well the tiny system's agents think in latents: each role's latent rollout from its text prompt,
 * decoded by argmax(lm_head(h)) at every step, against the gold text it would write (the planner's plan
 * from the question; the critic's refined plan from the question and the gold plan). A rollout that reads
 * its link's output as the token it stands for decodes to the text; one that does not drifts.
 *
 *   npx tsx scripts/tiny-system/build.ts rollouts [--system DIR] [--split validation|test] [--limit N] [--roles planner,critic] [--chain]
 *
 * --chain scores the rollouts inside the system instead (scoreChain: one latent round of `ask`, where the
 * critic reads the planner's latents through the outer link).
 * Prints, per role, the rows whose decoded rollout is exactly the gold text and the share of gold tokens
 * decoded before the first wrong one.
 */
import { resolve } from 'node:path';
import { F, noGrad } from '../../src/autograd/index.ts';
import { InvalidArgument } from '../../src/errors.ts';
import { latentRollout } from '../../src/mas/rollout.ts';
import { ask } from '../../src/mas/ask.ts';
import type { Decoder } from '../../src/model/decoder.ts';
import type { Tensor } from '../../src/tensor/tensor.ts';
import type { Tokenizer } from '../../src/tokenizer/index.ts';
import { loadSystem } from '../../src/mas/system-folders.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { TINY_SYSTEM_DIR } from './paths.ts';
import type { TaskRow } from '../../src/eval/tiny-task.ts';
import { rolePrompt } from './train-agents.ts';

export type RolloutRole = 'planner' | 'critic';

export interface RolloutScore {
  role: RolloutRole;
  rows: number;
  /** Rows whose decoded rollout is the gold text, token for token. */
  exact: number;
  /** Gold tokens decoded before the first wrong one, over all gold tokens. */
  prefixShare: number;
  /** The decoded rollout of each row. */
  decoded: string[];
}

/** One role's score over rows, added up row by row. */
class Tally {
  private exact = 0;
  private right = 0;
  private all = 0;
  private readonly decoded: string[] = [];

  /** Decodes H [n, d] by argmax(lm_head) and scores it against `gold` (the matched prefix). */
  async add(agent: { decoder: Decoder; tokenizer: Tokenizer }, H: Tensor, gold: readonly number[]): Promise<void> {
    const logits = noGrad(() => F.linear(H, agent.decoder.weights.lmHead));
    const v = await logits.read();
    const V = logits.shape[1]!;
    const n = Math.min(gold.length, logits.shape[0]!);
    logits.dispose();
    const ids = Array.from({ length: n }, (_, i) => {
      let best = 0;
      for (let j = 1; j < V; j++) if (v[i * V + j]! > v[i * V + best]!) best = j;
      return best;
    });
    let k = 0;
    while (k < n && ids[k] === gold[k]) k++;
    this.right += k;
    this.all += gold.length;
    if (k === gold.length) this.exact++;
    this.decoded.push(agent.tokenizer.decode(ids));
  }

  score(role: RolloutRole, rows: number): RolloutScore {
    return { role, rows, exact: this.exact, prefixShare: this.all ? this.right / this.all : 0, decoded: this.decoded };
  }
}

const goldText = (role: RolloutRole, row: TaskRow) => (role === 'critic' ? row.refined_plan : row.plan);

export async function scoreRollouts(opts: {
  systemDir?: string;
  rows: readonly TaskRow[];
  roles?: readonly RolloutRole[];
  backend?: Backend;
}): Promise<RolloutScore[]> {
  const backend = opts.backend ?? new CpuBackend('f32');
  const system = await loadSystem('tiny_sequential', { backend, embeddedRoot: resolve(opts.systemDir ?? TINY_SYSTEM_DIR), task: 'math' });
  try {
    const scores: RolloutScore[] = [];
    for (const role of opts.roles ?? ['planner', 'critic']) {
      const agent = system.agents.get(role);
      if (!agent?.inner) throw new InvalidArgument(`the tiny system has no ${role} with an inner link`);
      const tok = agent.tokenizer;
      const tally = new Tally();
      for (const row of opts.rows) {
        const gold = tok.encode(goldText(role, row), { addSpecialTokens: false });
        const prompt = tok.encode(rolePrompt(tok, role, 'first', row.question, role === 'critic' ? row.plan : ''), {
          addSpecialTokens: false,
        });
        const H = await latentRollout(agent.decoder, agent.inner, [prompt], gold.length);
        await tally.add(agent, H, gold);
        H.dispose();
      }
      scores.push(tally.score(role, opts.rows.length));
    }
    return scores;
  } finally {
    system.dispose();
  }
}

/**
 * The same score inside the running system: `ask` in latent mode, one round, m latent steps (the style's
 * default), and each non-final stage's rollout decoded by its own lm_head against its gold text. Here the
 * critic reads the planner's latent message through outer_12, not the gold plan.
 */
export async function scoreChain(opts: {
  systemDir?: string;
  rows: readonly TaskRow[];
  latentSteps?: number;
  backend?: Backend;
}): Promise<RolloutScore[]> {
  const backend = opts.backend ?? new CpuBackend('f32');
  const system = await loadSystem('tiny_sequential', { backend, embeddedRoot: resolve(opts.systemDir ?? TINY_SYSTEM_DIR), task: 'math' });
  try {
    const tallies = new Map<RolloutRole, Tally>([
      ['planner', new Tally()],
      ['critic', new Tally()],
    ]);
    for (const row of opts.rows) {
      await ask(system, {
        question: row.question,
        task: 'math',
        rounds: 1,
        mode: 'latent',
        sampling: { greedy: true },
        maxNewTokens: 1,
        answerRetry: false,
        ...(opts.latentSteps ? { latentSteps: opts.latentSteps } : {}),
        onStage: async (rec) => {
          const tally = tallies.get(rec.role as RolloutRole);
          if (!rec.hidden || !tally) return;
          const agent = system.agents.get(rec.role)!;
          await tally.add(agent, rec.hidden, agent.tokenizer.encode(goldText(rec.role as RolloutRole, row), { addSpecialTokens: false }));
        },
      });
    }
    return [...tallies].map(([role, t]) => t.score(role, opts.rows.length));
  } finally {
    system.dispose();
  }
}
