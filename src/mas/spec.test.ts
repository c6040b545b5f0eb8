// specAt (spec.ts): every file path of a SystemSpec resolved against a base URL; bytes, absolute URLs and the
// other fields kept.
import { describe, expect, it } from 'vitest';
import { specAt, specKey, type SystemSpec } from './spec';

describe('specAt', () => {
  const link = new Uint8Array([1, 2, 3]);
  const raw: SystemSpec = {
    style: 'tiny_sequential',
    roles: {
      planner: { model: 'models/tiny/planner/', innerLink: 'models/tiny/planner/adapter.pt', innerType: 'adapter' },
      solver: { model: 'https://hub.test/Org/Solver/resolve/main/', tokenizer: 'tok/', innerLink: link },
    },
    outer: { planner_to_solver: 'models/tiny/outer/outer_12.pt', solver_to_planner: link },
    prompts: 'models/tiny/prompts.json',
    outerRepo: './models/tiny/outer/',
    quantize: null,
    label: 'offline tiny',
  };

  it('resolves each path against the base and keeps bytes, absolute URLs and the other fields', () => {
    const s = specAt(raw, 'https://app.test/play/');
    expect(s).toEqual({
      style: 'tiny_sequential',
      roles: {
        planner: {
          model: 'https://app.test/play/models/tiny/planner/',
          innerLink: 'https://app.test/play/models/tiny/planner/adapter.pt',
          innerType: 'adapter',
        },
        solver: { model: 'https://hub.test/Org/Solver/resolve/main/', tokenizer: 'https://app.test/play/tok/', innerLink: link },
      },
      outer: { planner_to_solver: 'https://app.test/play/models/tiny/outer/outer_12.pt', solver_to_planner: link },
      prompts: 'https://app.test/play/models/tiny/prompts.json',
      outerRepo: 'https://app.test/play/models/tiny/outer/',
      quantize: null,
      label: 'offline tiny',
    });
    expect(s.roles.solver!.innerLink).toBe(link); // the same bytes, not a copy
    expect(raw.roles.planner!.model).toBe('models/tiny/planner/'); // the input is not changed
  });

  it('adds no field the spec lacks, and equal specs at one base get equal keys', () => {
    const bare = specAt({ style: 'sequential_light', roles: { a: { model: 'm/' } } }, 'https://app.test/');
    expect(bare).toEqual({ style: 'sequential_light', roles: { a: { model: 'https://app.test/m/' } }, outer: {} });
    const key = (s: SystemSpec, base: string) => specKey(specAt(s, base), 'webgpu|');
    expect(key(raw, 'https://app.test/')).toBe(key(structuredClone(raw), 'https://app.test/'));
    expect(key(raw, 'https://app.test/')).not.toBe(key(raw, 'https://app.test/x/'));
  });
});
