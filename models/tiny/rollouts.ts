/**
 * How well the tiny system's agents think in latents: each role's latent rollout from its text prompt,
 * decoded by argmax(lm_head(h)) at every step, against the gold text it would write (the planner's plan
 * from the question; the critic's refined plan from the question and the gold plan). A rollout that reads
 * its link's output as the token it stands for decodes to the text; one that does not drifts.
 *
 *   npx tsx models/tiny/rollouts.ts [--system DIR] [--split validation|test] [--limit N] [--roles planner,critic]
 *
 * Prints, per role, the rows whose decoded rollout is exactly the gold text and the share of gold tokens
 * decoded before the first wrong one.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { F, noGrad } from '../../src/autograd/index.ts';
import { InvalidArgument } from '../../src/errors.ts';
import { latentRollout } from '../../src/mas/rollout.ts';
import { loadSystem } from '../../src/mas/system.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { TINY_SYSTEM_DIR } from './eval.ts';
import { taskSplit, type TaskRow } from './task.ts';
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

export async function scoreRollouts(opts: { systemDir?: string; rows: readonly TaskRow[]; roles?: readonly RolloutRole[]; backend?: Backend }): Promise<RolloutScore[]> {
  const backend = opts.backend ?? new CpuBackend('f32');
  const system = await loadSystem('tiny_sequential', { backend, embeddedRoot: resolve(opts.systemDir ?? TINY_SYSTEM_DIR), task: 'math' });
  try {
    const scores: RolloutScore[] = [];
    for (const role of opts.roles ?? ['planner', 'critic']) {
      const agent = system.agents.get(role);
      if (!agent?.inner) throw new InvalidArgument(`the tiny system has no ${role} with an inner link`);
      const tok = agent.tokenizer;
      let exact = 0;
      let right = 0;
      let all = 0;
      const decoded: string[] = [];
      for (const row of opts.rows) {
        const gold = tok.encode(role === 'critic' ? row.refined_plan : row.plan, { addSpecialTokens: false });
        const prompt = tok.encode(rolePrompt(tok, role, 'first', row.question, role === 'critic' ? row.plan : ''), { addSpecialTokens: false });
        const H = await latentRollout(agent.decoder, agent.inner, [prompt], gold.length);
        const logits = noGrad(() => F.linear(H, agent.decoder.weights.lmHead));
        const v = await logits.read();
        const V = logits.shape[1]!;
        logits.dispose();
        H.dispose();
        const ids = gold.map((_, i) => {
          let best = 0;
          for (let j = 1; j < V; j++) if (v[i * V + j]! > v[i * V + best]!) best = j;
          return best;
        });
        let k = 0;
        while (k < gold.length && ids[k] === gold[k]) k++;
        right += k;
        all += gold.length;
        if (k === gold.length) exact++;
        decoded.push(tok.decode(ids));
      }
      scores.push({ role, rows: opts.rows.length, exact, prefixShare: all ? right / all : 0, decoded });
    }
    return scores;
  } finally {
    system.dispose();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const usage = 'usage: tsx models/tiny/rollouts.ts [--system DIR] [--split validation|test] [--limit N] [--roles planner,critic]';
  const a: { system?: string; split: 'validation' | 'test'; limit: number; roles: RolloutRole[] } = { split: 'validation', limit: 40, roles: ['planner', 'critic'] };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    const v = argv[++i];
    if (v === undefined) throw new InvalidArgument(`${k} needs a value; ${usage}`);
    if (k === '--system') a.system = v;
    else if (k === '--split') {
      if (v !== 'validation' && v !== 'test') throw new InvalidArgument(`--split ${v}: expected validation or test`);
      a.split = v;
    } else if (k === '--limit') {
      a.limit = Number(v);
      if (!Number.isInteger(a.limit) || a.limit < 1) throw new InvalidArgument(`--limit must be a positive integer, got ${v}`);
    } else if (k === '--roles') {
      a.roles = v.split(',').map((r) => r.trim()) as RolloutRole[];
      if (a.roles.some((r) => r !== 'planner' && r !== 'critic')) throw new InvalidArgument(`--roles ${v}: expected planner and/or critic`);
    } else throw new InvalidArgument(`unknown argument ${k}; ${usage}`);
  }
  const scores = await scoreRollouts({ systemDir: a.system, rows: taskSplit(a.split).slice(0, a.limit), roles: a.roles });
  for (const s of scores) {
    process.stdout.write(`${s.role}: the decoded rollout is the gold text on ${s.exact}/${s.rows} ${a.split} rows; `
      + `gold prefix ${(100 * s.prefixShare).toFixed(1)}% of tokens\n  first row: ${JSON.stringify(s.decoded[0] ?? '')}\n`);
  }
}
