import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadBenchmark, medqaGold, toItems } from './datasets';

describe('benchmark rows as questions', () => {
  it('math500: problem and the gold answer (boxed content of a worked solution)', async () => {
    const [a, b] = await toItems('math500', [
      { problem: 'What is $1+1$?', answer: '2' },
      { question: 'Solve x+1=3.', answer: 'So x = \\boxed{2}.' },
    ]);
    expect(a).toEqual({ index: 0, question: 'What is $1+1$?', task: 'math', check: { kind: 'math', gold: '2' } });
    expect(b!.check).toEqual({ kind: 'math', gold: '2' });
    // the row's subject and level become its groups, for per-group accuracy
    const [c] = await toItems('math500', [{ problem: 'p', answer: '1', subject: 'Algebra', level: 3, unique_id: 'test/algebra/1.json' }]);
    expect(c!.groups).toEqual({ subject: 'Algebra', level: '3' });
    expect(a!.groups).toBeUndefined();
  });

  it('gpqa: options in the order Python gives them for md5(seed::stem), the gold letter follows the correct one', async () => {
    // /usr/bin/python3: r = random.Random(int(hashlib.md5(f'42::{stem}'.encode()).hexdigest()[:16], 16)); r.shuffle(['4', '3', '5', '22'])
    //   -> ['3', '22', '4', '5'];  for 'Which gas is inert?' and ['Argon', 'Oxygen', 'Nitrogen', 'Hydrogen']
    //   -> ['Nitrogen', 'Argon', 'Oxygen', 'Hydrogen']
    const items = await toItems(
      'gpqa',
      [
        {
          Question: ' What is 2+2? ',
          'Correct Answer': '4',
          'Incorrect Answer 1': '3',
          'Incorrect Answer 2': '5',
          'Incorrect Answer 3': '22',
        },
        {
          Question: 'Which gas is inert?',
          'Correct Answer': 'Argon',
          'Incorrect Answer 1': 'Oxygen',
          'Incorrect Answer 2': 'Nitrogen',
          'Incorrect Answer 3': 'Hydrogen',
        },
      ],
      { seed: 42 },
    );
    expect(items[0]!.question).toBe('What is 2+2?\n\nA. 3\nB. 22\nC. 4\nD. 5\n\nChoose the correct option (A/B/C/D).');
    expect(items[0]!.check).toEqual({ kind: 'choice', gold: 'C' });
    expect(items[1]!.question).toContain('A. Nitrogen\nB. Argon\nC. Oxygen\nD. Hydrogen');
    expect(items[1]!.check).toEqual({ kind: 'choice', gold: 'B' });
    // another seed, another order (the stem is the same)
    const other = await toItems(
      'gpqa',
      [
        {
          Question: 'What is 2+2?',
          'Correct Answer': '4',
          'Incorrect Answer 1': '3',
          'Incorrect Answer 2': '5',
          'Incorrect Answer 3': '22',
        },
      ],
      { seed: 7 },
    );
    expect(other[0]!.question).not.toBe(items[0]!.question);
  });

  it('medqa: options appended when the stem has none, gold from the letter or the option text', async () => {
    const [a, b, c] = await toItems('medqa', [
      { question: 'Which drug?', options: ['Aspirin', 'Heparin', 'Warfarin', 'Insulin'], answer: 'C' },
      {
        query: 'Which drug?\nA. Aspirin\nB. Heparin\nC. Warfarin\nD. Insulin',
        options: { A: 'Aspirin', B: 'Heparin', C: 'Warfarin', D: 'Insulin' },
        answer: 'heparin',
      },
      { question: 'Pick one.', options: ['(A) x', '(B) y'], answer: 'something else' },
    ]);
    expect(a!.question).toBe('Which drug?\nA. Aspirin\nB. Heparin\nC. Warfarin\nD. Insulin\n\nChoose the correct option (A/B/C/D).');
    expect(a!.check).toEqual({ kind: 'choice', gold: 'C' });
    expect(b!.question).toBe('Which drug?\nA. Aspirin\nB. Heparin\nC. Warfarin\nD. Insulin\n\nChoose the correct option (A/B/C/D).');
    expect(b!.check).toEqual({ kind: 'choice', gold: 'B' });
    expect(c!.question).toContain('A. x\nB. y');
    expect(c!.check).toEqual({ kind: 'choice', gold: 'A' }); // upstream's fallback
    expect(medqaGold('(D) Insulin', [['D', 'Insulin']])).toBe('D');
    expect(medqaGold('Warfarin therapy', [['A', 'Aspirin'], ['C', 'Warfarin']])).toBe('C');
  });

  it('mbppplus: prompt, the first asserts, the function name and the test script', async () => {
    const [a, b] = await toItems(
      'mbppplus',
      [
        {
          task_id: 'Mbpp/2',
          prompt: 'Write a function to find the shared elements.',
          test_list: [
            'assert set(similar_elements((3, 4), (5, 4))) == set((4,))',
            'assert similar_elements((1,), (1,)) == (1,)',
            'assert x',
            'assert y',
          ],
          test: 'inputs = []\n',
          code: 'def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n',
        },
        { prompt: 'p', test_list: ['assert f(1) == 1'], test_imports: ['import math', ''], test: 'assert f(1) == math.floor(1.2)' },
      ],
      { promptTests: 2 },
    );
    expect(a).toEqual({
      index: 0, task: 'code', fnName: 'similar_elements', check: { kind: 'mbppplus', test: 'inputs = []\n' },
      question: 'Write a function to find the shared elements.\n\nYour solution should satisfy assertions like:\n' +
        'assert set(similar_elements((3, 4), (5, 4))) == set((4,))\nassert similar_elements((1,), (1,)) == (1,)',
    });
    // the test's own imports go before it
    expect(b).toMatchObject({ fnName: 'f', check: { kind: 'mbppplus', test: 'import math\nassert f(1) == math.floor(1.2)' } });
  });

  it('livecodebench: statement, starter code, public tests and the function name from metadata', async () => {
    const [a] = await toItems('livecodebench', [{
      question_content: 'Add two numbers.', starter_code: 'class Solution:\n    def add(self, a: int, b: int) -> int:\n        ',
      public_test_cases: JSON.stringify([{ input: '1\n2', output: '3', testtype: 'functional' }]), private_test_cases: '',
      metadata: JSON.stringify({ func_name: 'add' }),
    }]);
    expect(a!.question).toBe('Add two numbers.\n\nStarter code:\nclass Solution:\n    def add(self, a: int, b: int) -> int:');
    expect(a!.fnName).toBe('add');
    expect(a!.check).toEqual({ kind: 'lcb', tests: [{ input: '1\n2', output: '3', testtype: 'functional' }] });
  });

  it('aime and search QA: math items, and exact-match answers with their aliases', async () => {
    const [a] = await toItems('aime25', [{ id: 'I-1', problem: 'Find n.', answer: 70 }]);
    expect(a).toEqual({ index: 0, question: 'Find n.', task: 'math', check: { kind: 'math', gold: '70' } });
    const [b, c] = await toItems('bamboogle', [
      { Question: 'Who?', Answer: 'Ada Lovelace' },
      { question: 'Where?', answers: ['NYC', 'New York City', ''] },
    ]);
    expect(b!.check).toEqual({ kind: 'freeform', gold: ['Ada Lovelace'] });
    expect(c!.check).toEqual({ kind: 'freeform', gold: ['NYC', 'New York City'] });
    await expect(toItems('hotpotqa', [{ question: 'q', answer: '' }])).rejects.toThrow(
      /row 0 of hotpotqa has no "answer", "Answer" or "answers" field with text/,
    );
    await expect(loadBenchmark('aime26')).rejects.toThrow(
      /aime26 has no published source .* pass a JSON\/JSONL copy with --dataset_file \(rows with problem or question, and answer\)/,
    );
  });

  it('marks search QA and rows that say "judge": true for the LLM judge', async () => {
    const [b, c] = await toItems('bamboogle', [{ question: 'Who?', answer: 'Ada' }, { question: 'Where?', answer: 'NYC', judge: false }]);
    expect([b!.judge, c!.judge]).toEqual([true, undefined]);
    expect((await toItems('hotpotqa', [{ question: 'q', answer: 'a' }]))[0]!.judge).toBe(true);
    const [m, n] = await toItems(null, [{ question: '1+1?', answer: '2', judge: true }, { question: '2+2?', answer: '4' }]);
    expect(m).toEqual({ index: 0, question: '1+1?', task: 'math', check: { kind: 'math', gold: '2' }, judge: true });
    expect(n!.judge).toBeUndefined();
    await expect(toItems(null, [{ question: 'q', answer: 'a', judge: 'yes' }])).rejects.toThrow(
      /row 0 of the dataset file: "judge" must be true or false, got "yes"/,
    );
    await expect(toItems('mbppplus', [{ prompt: 'Write f.', test_list: ['assert f() == 1'], test: 'assert f() == 1', judge: true }]))
      .rejects.toThrow(/row 0 of mbppplus asks for the LLM judge, but code is scored by running its tests/);
  });

  it('names what a row lacks', async () => {
    await expect(toItems('math500', [{ problem: 'x' }])).rejects.toThrow(/row 0 of math500 has no "answer" field \(it has problem\)/);
    await expect(toItems('gpqa', [{ Question: 'q', 'Correct Answer': 'a' }])).rejects.toThrow(/"Incorrect Answer 1"/);
  });
});

describe('loadBenchmark', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rmas-bench-'));
  it('reads a plain file as math, or as MedQA-style choice when rows have options', async () => {
    const math = join(dir, 'm.jsonl');
    writeFileSync(math, `${JSON.stringify({ question: '1+1?', answer: 'It is \\boxed{2}' })}\n`);
    const r = await loadBenchmark(math);
    expect(r.name).toBeNull();
    expect(r.items[0]!.check).toEqual({ kind: 'math', gold: '2' });
    const choice = join(dir, 'c.json');
    writeFileSync(choice, JSON.stringify([{ question: 'Pick.', options: ['x', 'y'], answer: 'B' }]));
    expect((await loadBenchmark(choice)).items[0]!.check).toEqual({ kind: 'choice', gold: 'B' });
  });
  it('takes a benchmark from --dataset_file, and fails clearly otherwise', async () => {
    const f = join(dir, 'med.json');
    writeFileSync(f, JSON.stringify([{ question: 'Q?', options: { A: 'a', B: 'b' }, answer: 'B' }]));
    const r = await loadBenchmark('medqa', { file: f });
    expect(r.name).toBe('medqa');
    expect(r.items[0]!.check).toEqual({ kind: 'choice', gold: 'B' });
    await expect(loadBenchmark('medqa')).rejects.toThrow(/pass its path with --dataset_file/);
    await expect(loadBenchmark('mmlu')).rejects.toThrow(/expected one of math500, gpqa, medqa, mbppplus, livecodebench/);
    await expect(loadBenchmark(join(dir, 'none.jsonl'))).rejects.toThrow(/does not exist/);
  });
  it('takes a named benchmark from the datasetFiles hook with its repo, config and split; --dataset_split picks another', async () => {
    const csv = join(dir, 'gpqa_diamond.csv');
    writeFileSync(csv, 'Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,High-level domain\n' +
      '"Which is\nlargest?",9,1,2,3,Math\n');
    const asked: string[][] = [];
    const datasetFiles = async (...a: string[]) => (asked.push(a), [{ path: csv, format: 'csv' as const }]);
    const r = await loadBenchmark('gpqa', { datasetFiles, seed: 42 });
    expect(asked).toEqual([['Idavidrein/gpqa', 'gpqa_diamond', 'train']]);
    expect(r.items).toHaveLength(1);
    expect(r.items[0]!.question).toMatch(/^Which is\nlargest\?\n\n(?:[A-D]\. [1239]\n){4}\nChoose the correct option \(A\/B\/C\/D\)\.$/);
    expect(r.items[0]!.groups).toEqual({ domain: 'Math' });
    await loadBenchmark('math500', { datasetFiles: async (...a: string[]) => (asked.push(a), []), split: 'train' });
    expect(asked[1]).toEqual(['HuggingFaceH4/MATH-500', 'default', 'train']);
  });
  it('fetches a named benchmark through the rows API with the token for gated sets', async () => {
    const seen: { url: string; auth: string | null }[] = [];
    const fetch = (async (url: string, init?: RequestInit) => {
      seen.push({ url, auth: new Headers(init?.headers).get('authorization') });
      return new Response(JSON.stringify({ num_rows_total: 1, rows: [{ row_idx: 0, row: { problem: 'p', answer: '5' } }] }));
    }) as typeof globalThis.fetch;
    const r = await loadBenchmark('math500', { fetch, token: 'hf_x' });
    expect(r.items).toEqual([{ index: 0, question: 'p', task: 'math', check: { kind: 'math', gold: '5' } }]);
    expect(seen[0]!.url).toContain('dataset=HuggingFaceH4%2FMATH-500&config=default&split=test');
    expect(seen[0]!.auth).toBe('Bearer hf_x');
    const denied = (async () => new Response(JSON.stringify({ error: 'gated' }), { status: 401 })) as unknown as typeof globalThis.fetch;
    await expect(loadBenchmark('gpqa', { fetch: denied })).rejects.toThrow(
      /Idavidrein\/gpqa may be gated: accept its terms on huggingface.co and set HF_TOKEN/,
    );
  });
});
