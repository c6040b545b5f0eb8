/**
 * Both loops on every style (tiny upstream-layout systems of scripts/tiny-system/tiny-mas.ts, CPU): the inner loop
 * trains each role of each style from a row holding every style's columns, and one outer step of each
 * style with two rounds gives a finite loss and a non-zero gradient in every one of its outer links
 * (feedback links included), proving the loss reaches all of them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InnerLink, OuterLink } from '../../src/mas/links';
import { getStyle, STYLE_NAMES } from '../../src/mas/styles';
import { readLinkFile, resolveRoleFolder } from '../../src/mas/upstream';
import { loadDecoderFromDir } from '../../src/model';
import { CpuBackend } from '../../src/tensor/cpu';
import { loadTokenizerFromDir } from '../../src/tokenizer';
import type { Row } from '../../src/train/data';
import { createInnerJob, createOuterJob } from '../../src/train/jobs';
import { wholeBatch } from '../../src/train/loop';
import { buildTinySystem, type TinyStyle } from '../../scripts/tiny-system/tiny-mas';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-train-styles-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const be = new CpuBackend('f32');

const ROW: Row = {
  question: 'What is 3 + 4?', plan: 'Step 1: add.', refined_plan: 'Step 1: add 3 and 4.', answer: '7. \\boxed{7}',
  distill_expert: 'Step 1: add the numbers.', distill_learner: 'It is 7. \\boxed{7}',
  hie_math_expert: '3 + 4 = 7.', hie_code_expert: 'print(3 + 4)', hie_science_expert: 'Counting gives 7.',
  deliberation_reflector: 'Check by counting.', deliberation_toolcaller: '<python>print(3+4)</python> <result> 7 </result> \\boxed{7}',
};

async function system(style: TinyStyle) {
  const sys = await buildTinySystem(style, join(tmp, style));
  const spec = getStyle(style);
  const agents = new Map();
  const disposers: (() => void)[] = [];
  for (const r of spec.roles) {
    const dir = sys.roles[r.key];
    const decoder = await loadDecoderFromDir(dir, be);
    const ck = await resolveRoleFolder(r.key, dir, spec.taskScoped ? 'math' : null, { requireInner: true });
    const inner = InnerLink.fromStateDict(be, await readLinkFile(ck.innerPath!), { d: decoder.config.hidden }).freeze();
    disposers.push(() => (inner.dispose(), decoder.dispose()));
    agents.set(r.key, { decoder, inner, tokenizer: await loadTokenizerFromDir(dir), dir });
  }
  return { spec, agents, dispose: () => disposers.forEach((d) => d()) };
}

describe('training every style (CPU)', () => {
  for (const style of STYLE_NAMES as TinyStyle[]) {
    it(`${style}: the inner loop trains every role, one outer step reaches every outer link`, async () => {
      const s = await system(style);
      try {
        for (const r of s.spec.roles) {
          const a = s.agents.get(r.key);
          const link = InnerLink.create(be, a.decoder.config.hidden, { seed: 1 });
          const job = createInnerJob({
            decoder: a.decoder,
            tokenizer: a.tokenizer,
            link,
            rows: [ROW, ROW],
            shape: s.spec.shape,
            role: r.key,
            task: 'math',
            maxLength: 512,
            weights: { cos: 1, mse: 0 },
            optimizer: {},
          });
          expect(job.size, `${style} ${r.key} usable rows`).toBe(2);
          job.optimizer.zeroGrad();
          const res = await job.runBatch([0, 1], 1, wholeBatch([0, 1]));
          expect(Number.isFinite(res.loss) && res.loss > 0, `${style} ${r.key} inner loss ${res.loss}`).toBe(true);
          link.dispose();
        }
        const outer = new Map<string, OuterLink>();
        for (const [i, l] of s.spec.links.entries()) {
          outer.set(
            l.key,
            OuterLink.create(be, s.agents.get(l.from).decoder.config.hidden, s.agents.get(l.to).decoder.config.hidden, {
              seed: 20 + i,
              name: l.key,
            }),
          );
        }
        const job = createOuterJob({
          style: s.spec, agents: s.agents, outer, rows: [ROW, ROW], task: 'math', batchSize: 2, optimizer: {},
          loss: { rounds: 2, maxLatentTokens: 4, superviseFinalOnly: true, nonLastLossWeight: 0.1, maxLength: 1024 },
        });
        expect(job.size).toBe(2);
        job.optimizer.zeroGrad();
        const res = await job.runBatch([0, 1], 1, wholeBatch([0, 1]));
        expect(res.valid).toBe(2);
        expect(Number.isFinite(res.loss) && res.loss > 0).toBe(true);
        for (const [key, l] of outer) {
          let sq = 0;
          for (const g of (await l.params.export('grad')).values()) for (const x of g) sq += x * x;
          expect(sq, `gradient reaching ${key}`).toBeGreaterThan(0);
          l.dispose();
        }
      } finally {
        s.dispose();
      }
    });
  }
});
