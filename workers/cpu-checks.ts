/**
 * Hand-computed checks of the CPU backend: what the self-test runs where there is no WebGPU, so the
 * fallback the page would use is itself shown to compute right. Expected values are written out by
 * hand, not produced by the code under test.
 */
import { F } from '../src/autograd';
import type { CpuBackend, Tensor } from '../src/tensor';

export interface CpuCheck {
  group: string;
  name: string;
  run(cpu: CpuBackend): Promise<{ actual: ArrayLike<number>; expected: number[] }>;
}

const values = async (t: Tensor) => (t.dtype === 'i32' ? [...(await t.readI32())] : [...(await t.read())]);

export const cpuChecks: CpuCheck[] = [
  {
    group: 'elementwise',
    name: 'add with row broadcast: [[1,2,3],[4,5,6]] + [10,20,30]',
    async run(cpu) {
      const out = F.add(cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]), cpu.fromValues([10, 20, 30], [3]));
      return { actual: await values(out), expected: [11, 22, 33, 14, 25, 36] };
    },
  },
  {
    group: 'elementwise',
    name: 'mul and scale: 2 * ([1,2,3] * [4,5,6]) - 1',
    async run(cpu) {
      const out = F.scale(F.mul(cpu.fromValues([1, 2, 3], [3]), cpu.fromValues([4, 5, 6], [3])), 2, -1);
      return { actual: await values(out), expected: [7, 19, 35] };
    },
  },
  {
    group: 'elementwise',
    name: 'column sums of [[1,2],[3,4],[5,6]]',
    async run(cpu) {
      return { actual: await values(F.sumRows(cpu.fromValues([1, 2, 3, 4, 5, 6], [3, 2]), [2])), expected: [9, 12] };
    },
  },
  {
    group: 'sample',
    name: 'argmax, lowest index among equal maxima',
    async run(cpu) {
      return { actual: await values(F.argmax(cpu.fromValues([0, 3, 1, 3, -2, 5, 5, 4], [2, 4]))), expected: [1, 1] };
    },
  },
  {
    group: 'sample',
    name: 'top-k 1 and a tiny top-p pick the argmax for any seed',
    async run(cpu) {
      const x = cpu.fromValues([0.2, -1, 2.5, 2.4], [4]);
      const ids = [];
      for (let seed = 0; seed < 4; seed++)
        ids.push(...(await values(F.sample(x, { topK: 1, seed }))), ...(await values(F.sample(x, { topP: 1e-6, seed }))));
      return { actual: ids, expected: Array(8).fill(2) };
    },
  },
];
