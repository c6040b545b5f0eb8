import { F } from '../../autograd';
import { type ParityCase, expectParity, pair } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';

// Column ops move words: GPU and CPU agree exactly.
const EXACT = { atol: 0, rtol: 0 };
const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

// [leading dims, widths]: one part, odd sizes, a part of width 1, Qwen3.5's query | gate halves, 6 parts, rank 1 and 3.
const SPLITS: [lead: number[], widths: number[]][] = [
  [[7], [5]], [[17], [3, 96, 1]], [[1], [1, 2]], [[3], [256, 256]], [[5], [1, 3, 17, 2, 1, 4]], [[], [2, 1, 3]], [[2, 3], [4, 1, 9]],
];

export const cases: ParityCase[] = [
  ...SPLITS.map(([lead, widths]): ParityCase => ({
    name: `cols splitCols [${[...lead, widths.reduce((a, b) => a + b, 0)]}] into ${widths.join(' | ')}, concatCols of the parts, and their backward`,
    async run(env) {
      const C = widths.reduce((a, b) => a + b, 0);
      const shape = [...lead, C];
      const xv = env.rng.normals(numel(shape));
      const x = pair(env, xv, shape);
      const gs = F.splitCols(x.g, widths);
      const cs = F.splitCols(x.c, widths);
      for (let i = 0; i < widths.length; i++) await expectParity(gs[i], cs[i], EXACT, `part ${i}`);
      // the parts joined in reverse order: concat_cols reads every input at its own width
      await expectParity(F.concatCols([...gs].reverse()), F.concatCols([...cs].reverse()), EXACT, 'concat');
      // backward: with several parts, the first unused (no gradient: zeros) and the last used twice (gradients summed)
      await expectGradParity(
        env,
        'split backward',
        (t) => {
          const ps = F.splitCols(t, widths);
          return ps.length === 1 ? ps[0] : F.concatCols([...ps.slice(1), ps[ps.length - 1]]);
        },
        [{ values: xv, shape }],
        EXACT,
      );
    },
  })),
  {
    name: 'cols concatCols of three inputs [9, 1 | 4 | 2] and its backward (slices)',
    async run(env) {
      const spec = (w: number) => ({ values: env.rng.normals(9 * w), shape: [9, w] });
      await expectGradParity(env, 'concat backward', (a, b, c) => F.concatCols([a, b, c]), [spec(1), spec(4), spec(2)], EXACT);
    },
  },
];
