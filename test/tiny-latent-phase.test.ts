/**
 * The tiny system's latent phase (scripts/tiny-system/latent-phase.ts): its cycles are warm restarts, so a run of
 * two cycles equals a first run followed by a second one started from its saved agent and link (with the
 * next seed), bitwise; it continues f32 checkpoints only and says so otherwise.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TINY_STAGES_DIR, TINY_SYSTEM_DIR } from '../scripts/tiny-system/paths';
import { latentPhase } from '../scripts/tiny-system/latent-phase';
import { InvalidArgument } from '../src/errors';
import { parseDecoderConfig } from '../src/model/config';
import { createTrainableDecoder, saveDecoderCheckpoint } from '../src/model/trainable';
import { CpuBackend } from '../src/tensor/cpu';

const tmp: string[] = [];
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

/** A writable copy of the committed system with the text-stage planner. */
function textSystem(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tiny-latent-'));
  tmp.push(dir);
  cpSync(TINY_SYSTEM_DIR, dir, { recursive: true });
  cpSync(join(TINY_STAGES_DIR, 'text', 'planner.safetensors'), join(dir, 'planner', 'model.safetensors'));
  return dir;
}

describe('the latent phase', () => {
  it('runs its cycles as warm restarts: two cycles equal two runs, bitwise', async () => {
    const link = join(TINY_STAGES_DIR, 'inner', 'planner.pt');
    const quiet = { log: () => {}, trainRows: 48 };
    const whole = textSystem();
    // the second cycle adds the rollout read-back term and arithmetic drills
    const both = await latentPhase({
      system: whole,
      role: 'planner',
      link,
      cycles: [3, 2],
      rolloutWeights: [0, 1],
      drills: [0, 24],
      seed: 7,
      ...quiet,
    });
    const split = textSystem();
    const first = await latentPhase({ system: split, role: 'planner', link, cycles: [3], seed: 7, ...quiet });
    const second = await latentPhase({
      system: split,
      role: 'planner',
      link: join(split, 'planner', 'adapter.pt'),
      cycles: [2],
      rolloutWeights: [1],
      drills: [24],
      seed: 8,
      ...quiet,
    });
    // the term is on in the second cycle: from the same first cycle, its first step without it has a lower
    // loss (the term adds a cross-entropy)
    const without = textSystem();
    await latentPhase({ system: without, role: 'planner', link, cycles: [3], seed: 7, ...quiet });
    const plain = await latentPhase({
      system: without,
      role: 'planner',
      link: join(without, 'planner', 'adapter.pt'),
      cycles: [1],
      drills: [24],
      seed: 8,
      ...quiet,
    });
    expect(plain.losses[0]!).toBeLessThan(second.losses[0]! - 1e-3);
    expect(both.losses).toHaveLength(5);
    expect([...first.losses, ...second.losses]).toEqual(both.losses);
    for (const f of ['model.safetensors', 'adapter.pt']) {
      expect(readFileSync(join(split, 'planner', f)).equals(readFileSync(join(whole, 'planner', f))), f).toBe(true);
    }
    // and it trained: the agent's weights moved away from the text stage's
    expect(
      readFileSync(join(whole, 'planner', 'model.safetensors')).equals(readFileSync(join(TINY_STAGES_DIR, 'text', 'planner.safetensors'))),
    ).toBe(false);
  }, 240_000);

  it('rejects bad cycles and non-f32 agents with named errors', async () => {
    const dir = textSystem();
    const link = join(TINY_STAGES_DIR, 'inner', 'planner.pt');
    await expect(latentPhase({ system: dir, role: 'planner', link, cycles: [] })).rejects.toThrow(InvalidArgument);
    await expect(latentPhase({ system: dir, role: 'planner', link, cycles: [2, 0] })).rejects.toThrow(/cycles must be positive/);
    await expect(latentPhase({ system: dir, role: 'planner', link, cycles: [2, 2], rolloutWeights: [1] })).rejects.toThrow(
      /one non-negative rollout weight per cycle/,
    );
    await expect(latentPhase({ system: dir, role: 'planner', link, cycles: [2], drills: [1.5] })).rejects.toThrow(/one drill count/);
    // a bf16 checkpoint of the same architecture
    const config = parseDecoderConfig(JSON.parse(readFileSync(join(dir, 'planner', 'config.json'), 'utf8')), 'config.json');
    const { decoder, params } = createTrainableDecoder(config, new CpuBackend('f32'), { seed: 1 });
    await saveDecoderCheckpoint(join(dir, 'planner'), params, { dtype: 'bf16' });
    params.dispose();
    decoder.dispose();
    await expect(latentPhase({ system: dir, role: 'planner', link, cycles: [1] })).rejects.toThrow(
      /BF16; the latent phase continues f32 training checkpoints only/,
    );
  }, 60_000);
});
