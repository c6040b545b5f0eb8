import { describe, expect, it } from 'vitest';
import { parseDevices, placeRoles } from './devices';

const usage = (m: string) => new Error(m);

describe('--devices', () => {
  it('parses distinct indices, only with --backend cuda', () => {
    expect(parseDevices(undefined, 'cuda', usage)).toBeNull();
    expect(parseDevices('0', 'cuda', usage)).toEqual([0]);
    expect(parseDevices('2, 0,1', 'cuda', usage)).toEqual([2, 0, 1]);
    expect(() => parseDevices('0,1', undefined, usage)).toThrow('--devices 0,1 picks CUDA devices: it needs --backend cuda');
    expect(() => parseDevices('0,1', 'webgpu', usage)).toThrow(/needs --backend cuda/);
    for (const bad of ['', '0,', '-1', '1.5', 'gpu0'])
      expect(() => parseDevices(bad, 'cuda', usage), bad).toThrow(/expected CUDA device indices/);
    expect(() => parseDevices('0,2,0', 'cuda', usage)).toThrow('--devices 0,2,0: device 0 is listed twice');
  });

  it('places the roles in order over the devices, wrapping', () => {
    expect(placeRoles(['planner', 'critic', 'solver'], [0, 1, 2])).toEqual({ planner: 0, critic: 1, solver: 2 });
    expect(placeRoles(['expert', 'learner'], [3, 1])).toEqual({ expert: 3, learner: 1 });
    expect(placeRoles(['math', 'code', 'science', 'summarizer'], [0, 1])).toEqual({ math: 0, code: 1, science: 0, summarizer: 1 });
    expect(placeRoles(['planner', 'critic', 'solver'], [5])).toEqual({ planner: 5, critic: 5, solver: 5 });
  });
});
