// The Ask view's system: released folders per role, checkpoint overrides for inner and outer links.
import { describe, expect, it } from 'vitest';
import type { SystemSpec } from '../../workers/protocol';
import { OUTER, RELEASED, TINY, buildSpec, candidates, innerLinkOf, outerLinksOf, releasedSize, rolesOf } from './system';
import type { CheckpointInfo, CheckpointRegistry } from './services';

const b = (n: number) => new Uint8Array([n]);
const stored: Record<string, Record<string, Uint8Array>> = {
  in1: { 'adapter.safetensors': b(1), 'optimizer.safetensors': b(9), 'trainer_state.json': b(8) },
  out1: { 'outer_12.safetensors': b(2), 'outer_23.pt': b(3), 'config.json': b(7) },
};
const reg = async () => ({ files: async (id: string) => stored[id]! }) as unknown as CheckpointRegistry;

describe('system spec', () => {
  it('points each role of a released style at its repo', async () => {
    const spec = await buildSpec('sequential_light', {}, null, reg, new Map());
    expect(spec.roles).toEqual({
      planner: { model: 'https://huggingface.co/RecursiveMAS/Sequential-Light-Planner-Qwen3-1.7B/resolve/main' },
      critic: { model: 'https://huggingface.co/RecursiveMAS/Sequential-Light-Critic-Llama3.2-1B/resolve/main' },
      solver: { model: 'https://huggingface.co/RecursiveMAS/Sequential-Light-Solver-Qwen2.5-Math-1.5B/resolve/main' },
    });
    expect(spec.outer).toBeUndefined();
    expect(spec.outerRepo).toBe('https://huggingface.co/RecursiveMAS/Sequential-Light-Outerlinks/resolve/main');
  });

  it('points the roles of a Qwen3.5 style at their repos, or at backbones of their own', async () => {
    const spec = await buildSpec('distillation', {}, null, reg, new Map());
    expect(spec.roles).toEqual({
      expert: { model: 'https://huggingface.co/RecursiveMAS/Distillation-Expert-Qwen3.5-9B/resolve/main' },
      learner: { model: 'https://huggingface.co/RecursiveMAS/Distillation-Learner-Qwen3.5-4B/resolve/main' },
    });
    const own = { model: 'https://example.org/qwen3-4b/' };
    expect((await buildSpec('distillation', {}, null, reg, new Map(), { expert: own, learner: own })).roles).toEqual({
      expert: own,
      learner: own,
    });
  });

  it('puts checkpoint bytes in place of the tiny system’s links and says so in the label', async () => {
    const offline: SystemSpec = {
      style: 'tiny_sequential',
      roles: { planner: { model: '/m/p', innerLink: '/m/p/adapter.pt' }, solver: { model: '/m/s' } },
      outer: { outer_31: '/m/o31.pt' },
    };
    const spec = await buildSpec('tiny', { planner: 'in1', solver: RELEASED, [OUTER]: 'out1' }, offline, reg, new Map([['in1', 'run A']]));
    expect(spec.roles.planner).toEqual({ model: '/m/p', innerLink: b(1) });
    expect(spec.roles.solver).toEqual({ model: '/m/s' });
    expect(spec.outer).toEqual({ outer_31: '/m/o31.pt', outer_12: b(2), outer_23: b(3) });
    expect(spec.label).toBe('offline tiny + planner: run A, outer: out1');
    expect(offline.roles.planner!.innerLink).toBe('/m/p/adapter.pt'); // the offline spec is not changed
    expect(rolesOf('tiny', offline)).toEqual(['planner', 'solver']);
  });

  it('names what is missing in a checkpoint', () => {
    expect(() => innerLinkOf({ 'a.pt': b(1), 'b.pt': b(2) }, 'x')).toThrow(/no single inner link file \(found: a.pt, b.pt\)/);
    expect(() => outerLinksOf({ 'adapter.pt': b(1) }, 'x')).toThrow(/holds no outer_\*/);
    expect(innerLinkOf({ 'weights.pt': b(5) }, 'x')).toEqual(b(5));
  });

  it('offers inner checkpoints of the role and outer checkpoints of the style', () => {
    const c = (id: string, kind: 'inner' | 'outer', role?: string, style?: string): CheckpointInfo => ({
      id,
      name: id,
      kind,
      role,
      style,
      created: '2026-01-01T00:00:00.000Z',
      bytes: 0,
      files: [],
    });
    const list = [
      c('a', 'inner', 'planner'),
      c('b', 'inner'),
      c('c', 'inner', 'critic'),
      c('d', 'outer', undefined, 'mixture'),
      c('e', 'outer', undefined, 'sequential_light'),
    ];
    expect(candidates(list, 'sequential_light', 'planner').map((x) => x.id)).toEqual(['a', 'b']);
    expect(candidates(list, 'sequential_light', OUTER).map((x) => x.id)).toEqual(['e']);
  });

  it("sizes a released style by its base models' parameters (bf16), and none for the embedded ones", () => {
    const billions = (style: string) => Number(((releasedSize(style)?.params ?? 0) / 1e9).toFixed(2));
    // Qwen3-1.7B + Llama-3.2-1B + Qwen2.5-Math-1.5B; DeepSeek-R1-Distill-Qwen-1.5B + Coder-3B + BioMistral-7B + Qwen3.5-2B
    const released = ['sequential_light', 'sequential_scaled', 'mixture', 'distillation', 'deliberation'];
    expect(released.map(billions)).toEqual([4.2, 11, 13.5, 13, 8]);
    expect(releasedSize('sequential_light')!.bytes).toBe(8.4e9);
    expect([releasedSize(TINY), releasedSize('tiny_sequential'), releasedSize('no_such_style')]).toEqual([null, null, null]);
  });
});
