/**
 * The tiny system's latent rollouts (scripts/tiny-system/rollouts.ts), decoded by argmax at every step, on the first
 * 8 validation rows, as `npx tsx scripts/tiny-system/build.ts rollouts --limit 8` measured them for the README: after the
 * latent phase the planner's rollout is its plan; with the text-stage agents and the inner stage's links
 * (models/tiny/stages) it is not; the critic's is not yet in either.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TINY_STAGES_DIR, TINY_SYSTEM_DIR } from '../scripts/tiny-system/paths';
import { scoreChain, scoreRollouts } from '../scripts/tiny-system/rollouts';
import { taskSplit } from '../src/eval/tiny-task';

const tmp: string[] = [];
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});
const rows = taskSplit('validation').slice(0, 8);

describe('latent rollouts of the tiny system', () => {
  it('after the latent phase: the planner thinks its plan, the critic not yet', async () => {
    const [planner, critic] = await scoreRollouts({ rows });
    expect(planner!.exact).toBe(6);
    expect(planner!.prefixShare).toBeCloseTo(0.954, 3);
    expect(planner!.decoded[0]).toBe(rows[0]!.plan);
    expect(critic!.exact).toBe(0);
    expect(critic!.prefixShare).toBeCloseTo(0.25, 3);
  }, 120_000);

  it('before it (text-stage agents, inner-stage links): both drift', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tiny-rollouts-'));
    tmp.push(dir);
    cpSync(TINY_SYSTEM_DIR, dir, { recursive: true });
    for (const role of ['planner', 'critic']) {
      cpSync(join(TINY_STAGES_DIR, 'text', `${role}.safetensors`), join(dir, role, 'model.safetensors'));
      cpSync(join(TINY_STAGES_DIR, 'inner', `${role}.pt`), join(dir, role, 'adapter.pt'));
    }
    const [planner, critic] = await scoreRollouts({ systemDir: dir, rows });
    expect(planner!.exact).toBe(0);
    expect(planner!.prefixShare).toBeCloseTo(0.148, 3);
    expect(critic!.exact).toBe(0);
    expect(critic!.prefixShare).toBeCloseTo(0.062, 3);
  }, 120_000);

  it('inside the running system (one latent round): ' +
    'the planner thinks its plan, the critic reading it through outer_12 does not', async () => {
    const [planner, critic] = await scoreChain({ rows });
    // the planner's rollout is the same as from its text prompt: it reads nothing from another agent
    expect(planner!.exact).toBe(6);
    expect(planner!.prefixShare).toBeCloseTo(0.954, 3);
    expect(planner!.decoded[0]).toBe(rows[0]!.plan);
    expect(critic!.exact).toBe(0);
    expect(critic!.prefixShare).toBeCloseTo(0.0615, 3);
  }, 120_000);
});
