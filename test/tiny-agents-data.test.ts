// What the tiny agents train on beyond their role chats (scripts/tiny-system/train-agents.ts): the arithmetic
// drills (every fact of the task, in the refined plan's exact tokens for the critic, in the answer's for the
// solver's chain phase, loss on the results only) and the planner's feedback chats (the slot holds a solver
// answer, its own row's or another's).
import { describe, expect, it } from 'vitest';
import { arithmeticFacts, taskSplit } from '../src/eval/tiny-task.ts';
import { AGENT_SPECS, DRILL_LINES, drillExamples, roleExamples, taskTokenizer } from '../scripts/tiny-system/train-agents.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';

const tiny = taskTokenizer();
const tok = loadTokenizer({ tokenizerJson: tiny.tokenizerJson, tokenizerConfig: tiny.tokenizerConfig });
const train = taskSplit('train');

describe('arithmetic facts', () => {
  const facts = arithmeticFacts();
  it('lists each equation a problem can hold once, all of them true', () => {
    // values 1..30: a + n (n ≤ 9, sum ≤ 30) 225, a − n (n ≤ 9, difference ≥ 1) 225, a·2 (a ≤ 10) 10, a·3 (a ≤ 10) 10
    expect(facts).toHaveLength(470);
    expect(new Set(facts).size).toBe(470);
    for (const f of facts) {
      const [, a, op, b, c] = f.match(/^(\d+) ([-+*]) (\d+) = (\d+)$/)!;
      const x = Number(a), y = Number(b);
      expect(op === '+' ? x + y : op === '-' ? x - y : x * y, f).toBe(Number(c));
      expect(Number(c)).toBeGreaterThanOrEqual(1);
      expect(Number(c)).toBeLessThanOrEqual(30);
    }
  });

  it('covers every equation of every split', () => {
    const set = new Set(facts);
    for (const split of ['train', 'validation', 'test'] as const) {
      for (const row of taskSplit(split)) {
        for (const line of row.refined_plan.split('\n'))
          expect(set.has(line.replace(/^Step \d+: /, '').replace(/\.$/, '')), line).toBe(true);
      }
    }
  });
});

describe('the critic arithmetic drills', () => {
  const drills = drillExamples(tok, 20, 3);

  it('are the refined plan\'s line tokens with the loss on each result only', () => {
    const facts = new Set(arithmeticFacts());
    for (const d of drills) {
      expect(d.lossMask).toHaveLength(d.ids.length);
      const text = tok.decode(d.ids);
      const lines = text.split('\n');
      expect(lines).toHaveLength(DRILL_LINES);
      lines.forEach((line, j) => {
        expect(line.startsWith(`Step ${(j % 3) + 1}: `), line).toBe(true);
        expect(facts.has(line.slice(8).replace(/\.$/, '')), line).toBe(true);
      });
      // the supervised tokens spell, in order, each line's result (a space token, then the number)
      const supervised = d.ids.filter((_, i) => d.lossMask[i] === 1).map((t) => tok.decode([t])).join('');
      expect(supervised).toBe(lines.map((l) => ` ${l.split(' = ')[1]!.replace(/\.$/, '')}`).join(''));
    }
  });

  it('tokenize a line as a refined plan does', () => {
    const row = train[0]!;
    const line = row.refined_plan.split('\n')[0]!;
    const inPlan = tok.encode(row.refined_plan, { addSpecialTokens: false });
    // a drill line ends in '.\n' (one token) as every plan line but the last does
    const drillLine = tok.encode(`${line}\n`, { addSpecialTokens: false });
    expect(inPlan.slice(0, drillLine.length)).toEqual(drillLine);
    expect(drills[0]!.ids.slice(0, 4)).toEqual(drillLine.slice(0, 4)); // 'Step', ' ', '1', ':'
  });

  it('are a pure function of the seed', () => {
    expect(drillExamples(tok, 20, 3)).toEqual(drills);
    expect(drillExamples(tok, 20, 4)).not.toEqual(drills);
  });

  it('are what the critic trains on, first drill-heavy, then mostly chats; the solver gets a second cycle', () => {
    const critic = AGENT_SPECS.find((s) => s.role === 'critic')!;
    expect(critic.drills).toBe(3000);
    expect(critic.finetune).toEqual({ steps: 1500, drills: 500, lr: 2e-3 });
    // the solver gets a second cosine cycle on its chats alone; the planner one phase
    expect(AGENT_SPECS.find((s) => s.role === 'solver')!.finetune).toEqual({ steps: 1500, drills: 0, lr: 2e-3 });
    expect(AGENT_SPECS.filter((s) => s.drills).map((s) => s.role)).toEqual(['critic']);
    expect(AGENT_SPECS.find((s) => s.role === 'planner')!.finetune).toBeUndefined();
  });
});

describe('the solver arithmetic drills (format answer)', () => {
  const drills = drillExamples(tok, 20, 3, 'answer');

  it('are equations in the solver\'s working tokens with the loss on each result only', () => {
    const facts = new Set(arithmeticFacts());
    for (const d of drills) {
      expect(d.lossMask).toHaveLength(d.ids.length);
      const text = tok.decode(d.ids);
      expect(text.endsWith('.')).toBe(true);
      const eqs = text.slice(0, -1).split(', ');
      expect(eqs).toHaveLength(DRILL_LINES);
      for (const e of eqs) expect(facts.has(e), e).toBe(true);
      const supervised = d.ids.filter((_, i) => d.lossMask[i] === 1).map((t) => tok.decode([t])).join('');
      expect(supervised).toBe(eqs.map((e) => ` ${e.split(' = ')[1]}`).join(''));
    }
  });

  it('tokenize an equation as a solver\'s answer does', () => {
    // "8 + 8 = 16, 16 - 6 = 10. The answer is …": the first equation and its comma, then the next
    const row = train[0]!;
    const first = row.answer.slice(0, row.answer.indexOf(',') + 1);
    const inAnswer = tok.encode(row.answer, { addSpecialTokens: false });
    const eq = tok.encode(first, { addSpecialTokens: false });
    expect(inAnswer.slice(0, eq.length)).toEqual(eq);
    const drill = tok.decode(drills[0]!.ids);
    const drillFirst = tok.encode(drill.slice(0, drill.indexOf(',') + 1), { addSpecialTokens: false });
    expect(drills[0]!.ids.slice(0, drillFirst.length)).toEqual(drillFirst);
    // same seed, same facts as the plan format: only the layout differs
    const plan = tok.decode(drillExamples(tok, 1, 3)[0]!.ids).split('\n').map((l) => l.slice(8).replace(/\.$/, ''));
    expect(drill.slice(0, -1).split(', ')).toEqual(plan);
  });
});

describe('the planner feedback chats', () => {
  const rows = train.slice(0, 8);
  const { examples } = roleExamples(tok, 'planner', rows, 512);
  const feedbackOf = (i: number) => {
    const text = tok.decode(examples[i]!.ids);
    return text.slice(text.indexOf('Feedback:\n') + 'Feedback:\n'.length, text.indexOf('\nWrite the plan.'));
  };

  it('alternate first and feedback prompts, all targeting the row\'s plan', () => {
    examples.forEach((ex, i) => {
      const text = tok.decode(ex.ids);
      expect(text.includes('Feedback:'), `row ${i}`).toBe(i % 2 === 1);
      const target = ex.ids.filter((_, k) => ex.lossMask[k] === 1);
      expect(tok.decode(target)).toBe(`${rows[i]!.plan}<|im_end|>`);
    });
  });

  it('hold the row\'s own answer or another row\'s in the feedback slot', () => {
    expect(feedbackOf(1)).toBe(rows[1]!.answer);
    expect(feedbackOf(5)).toBe(rows[5]!.answer);
    expect(feedbackOf(3)).toBe(rows[(3 * 7 + 13) % rows.length]!.answer);
    expect(feedbackOf(3)).not.toBe(rows[3]!.answer);
  });
});

describe('a second training phase', () => {
  it('continued from a saved first phase equals the whole run (bitwise)', async () => {
    const { mkdtempSync, readFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { trainTinyAgents } = await import('../scripts/tiny-system/train-agents.ts');
    const { CpuBackend } = await import('../src/tensor/cpu.ts');
    const base = { ...AGENT_SPECS.find((s) => s.role === 'planner')!, steps: 3, drills: 2 };
    const spec = { ...base, finetune: { steps: 2, drills: 2, lr: 1e-3 } };
    const dirs = [0, 1, 2].map(() => mkdtempSync(join(tmpdir(), 'tiny-phase-')));
    try {
      const common = { seed: 7, trainRows: 8, batchSize: 2, logEvery: 0, backend: new CpuBackend('f32') };
      const [whole] = await trainTinyAgents({ ...common, out: dirs[0]!, specs: [spec] });
      const [first] = await trainTinyAgents({ ...common, out: dirs[1]!, specs: [base] });
      const [rest] = await trainTinyAgents({
        ...common,
        out: dirs[2]!,
        specs: [spec],
        firstPhase: { dir: dirs[1]!, losses: { planner: first!.losses } },
      });
      expect(whole!.losses).toHaveLength(5);
      expect(first!.losses).toEqual(whole!.losses.slice(0, 3));
      expect(rest!.losses).toEqual(whole!.losses);
      // the second phase moved the weights, and both runs end on the same bytes
      const bytes = (d: string) => readFileSync(join(d, 'planner', 'model.safetensors'));
      expect(bytes(dirs[1]!).equals(bytes(dirs[0]!))).toBe(false);
      expect(bytes(dirs[2]!).equals(bytes(dirs[0]!))).toBe(true);
      // the first phase's losses must be the recorded ones
      await expect(trainTinyAgents({ ...common, out: dirs[2]!, specs: [spec], firstPhase: { dir: dirs[1]!, losses: { planner: [1, 2] } } }))
        .rejects.toThrow(/needs the 3 recorded losses/);
    } finally {
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  }, 120_000);
});
