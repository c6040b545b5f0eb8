// The tiny build's chain phase (scripts/tiny-system/chain-phase.ts): what the solver reads there. Its message
// examples must be what `ask` feeds the solver, its check chats must hold the four kinds of slot, and a
// short run must train the solver and outer_23 and nothing else.
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { chainPhase, corruptNumbers, MessageSource, messageLogits, solverCheckChats } from '../scripts/tiny-system/chain-phase.ts';
import { TINY_SYSTEM_DIR } from '../scripts/tiny-system/paths.ts';
import { taskSplit } from '../src/eval/tiny-task.ts';
import { taskTokenizer } from '../scripts/tiny-system/train-agents.ts';
import { noGrad } from '../src/autograd/index.ts';
import { ask } from '../src/mas/ask.ts';
import { loadSystem } from '../src/mas/system-folders.ts';
import { CpuBackend } from '../src/tensor/cpu.ts';
import { Rng } from '../src/util/rng.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';

const tiny = taskTokenizer();
const tok = loadTokenizer({ tokenizerJson: tiny.tokenizerJson, tokenizerConfig: tiny.tokenizerConfig });
const train = taskSplit('train');
const tmp: string[] = [];
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

describe('the solver check chats', () => {
  const rows = train.slice(0, 8);
  const chats = solverCheckChats(tok, rows, 5);
  it('always target the row\'s own answer', () => {
    chats.forEach((c, i) => {
      const target = c.ids.filter((_, k) => c.lossMask[k] === 1);
      expect(tok.decode(target)).toBe(`${rows[i]!.answer}<|im_end|>`);
    });
  });

  it('hold the gold refined plan, nothing, the gold one with numbers changed, or another row\'s', () => {
    const text = (i: number) => tok.decode(chats[i]!.ids);
    expect(text(0)).toContain(rows[0]!.refined_plan);
    expect(text(4)).toContain(rows[4]!.refined_plan);
    // the empty slot: the same chat as the gold one's, less the plan
    const empty = text(1);
    expect(empty).not.toContain(rows[1]!.refined_plan);
    expect(empty.length).toBeLessThan(text(0).length);
    // changed numbers: the same words, not the same text
    for (const i of [2, 6]) {
      const s = text(i);
      expect(s).not.toContain(rows[i]!.refined_plan);
      expect(s.replace(/\d+/g, '#')).toContain(rows[i]!.refined_plan.replace(/\d+/g, '#'));
    }
    const other = rows[(3 * 7 + 13) % rows.length]!;
    expect(text(3)).toContain(other.refined_plan);
    expect(other.refined_plan).not.toBe(rows[3]!.refined_plan);
  });

  it('are a pure function of the seed', () => {
    expect(solverCheckChats(tok, rows, 5)).toEqual(chats);
    expect(solverCheckChats(tok, rows, 6)).not.toEqual(chats);
  });
});

describe('corruptNumbers', () => {
  it('changes numbers only, about half of them, from the seed', () => {
    const text = 'Step 1: 6 - 3 = 3.\nStep 2: 3 + 1 = 4.';
    let changed = 0;
    let all = 0;
    const rng = new Rng(9);
    for (let k = 0; k < 200; k++) {
      const out = corruptNumbers(text, rng);
      expect(out.replace(/\d+/g, '#')).toBe(text.replace(/\d+/g, '#'));
      const a = text.match(/\d+/g)!;
      const b = out.match(/\d+/g)!;
      a.forEach((x, i) => {
        all++;
        if (x !== b[i]) changed++;
        expect(Number(b[i])).toBeGreaterThanOrEqual(1);
        expect(Number(b[i])).toBeLessThanOrEqual(60);
      });
    }
    // P(changed) = 1/2 · 59/60 per number
    expect(changed / all).toBeGreaterThan(0.42);
    expect(changed / all).toBeLessThan(0.56);
    expect(corruptNumbers(text, new Rng(3))).toBe(corruptNumbers(text, new Rng(3)));
  });
});

describe('the message examples', () => {
  it('are what ask feeds the solver: teacher-forced on what it wrote, the logits pick each token it wrote', async () => {
    const be = new CpuBackend('f32');
    const system = await loadSystem('tiny_sequential', { backend: be, embeddedRoot: TINY_SYSTEM_DIR, task: 'math' });
    try {
      const source = new MessageSource(system, (row) => tok.encode(`${row.answer}<|im_end|>`, { addSpecialTokens: false }));
      const solver = system.agents.get('solver')!;
      const inner = system.agents.get('critic')!.inner!;
      const outer = system.outer.get('outer_23')!;
      for (const [row, rounds] of [[train[0]!, 1], [train[1]!, 3]] as const) {
        let written: number[] = [];
        await ask(system, {
          question: row.question, task: 'math', rounds, mode: 'latent', sampling: { greedy: true }, maxNewTokens: 12, answerRetry: false,
          onStage: (rec) => {
            if (rec.role === 'solver' && rec.generatedIds) written = rec.generatedIds;
          },
        });
        expect(written.length).toBeGreaterThan(4);
        const ex = await source.get(row, rounds, rounds - 1);
        expect(ex.target).toEqual(tok.encode(`${row.answer}<|im_end|>`, { addSpecialTokens: false }));
        const logits = noGrad(() => messageLogits(solver.decoder, inner, outer, { ...ex, target: written }));
        const V = logits.shape[1]!;
        const v = await logits.read();
        logits.dispose();
        const picks = written.map((_, i) => {
          let best = 0;
          for (let j = 1; j < V; j++) if (v[i * V + j]! > v[i * V + best]!) best = j;
          return best;
        });
        expect(picks, `${rounds} round(s)`).toEqual(written);
        // every round of a 3-round ask gives its own stage
        if (rounds === 3) expect((await source.get(row, 3, 0)).hidden).not.toEqual(ex.hidden);
      }
    } finally {
      system.dispose();
    }
  }, 120_000);
});

describe('a short chain phase', () => {
  it('trains the solver and outer_23 only, and writes them in place', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tiny-chain-'));
    tmp.push(dir);
    cpSync(TINY_SYSTEM_DIR, dir, { recursive: true });
    const before = (p: string) => readFileSync(join(dir, p));
    const files = [
      'planner/model.safetensors',
      'critic/model.safetensors',
      'solver/model.safetensors',
      'critic/adapter.pt',
      'outer/outer_12.pt',
      'outer/outer_23.pt',
      'outer/outer_31.pt',
    ];
    const old = new Map(files.map((f) => [f, before(f)]));
    const r = await chainPhase({
      system: dir,
      steps: 3,
      messageRows: { oneRound: 4, threeRounds: 2 },
      chatRows: 8,
      drills: 4,
      log: () => {},
    });
    expect(r.losses).toHaveLength(3);
    expect(r.examples).toEqual({ messages: 4 + 3 * 2, chats: 8, drills: 4 });
    for (const l of r.losses) expect(Number.isFinite(l) && l > 0).toBe(true);
    for (const f of files) {
      const changed = !before(f).equals(old.get(f)!);
      expect(changed, f).toBe(f === 'solver/model.safetensors' || f === 'outer/outer_23.pt');
    }
  }, 120_000);
});
