/**
 * Benchmark loaders (docs/method.md §7.2): the rows of a benchmark, from its Hugging Face dataset (the runner passes
 * `datasetFiles`, the hub client's files in the Hugging Face cache; the page reads the rows API, cached as JSONL)
 * or a local JSON/JSONL file, turned into questions as upstream's run.py asks them and the check that
 * scores each answer. AIME and the search-QA sets (bamboogle, hotpotqa) come from local files, as release 2's
 * loaders for them are not published; search QA is scored by exact match and by the LLM judge (judge.ts), as
 * is any row that says `"judge": true` (and a search-QA row that says `"judge": false` is scored by exact match
 * only). A local file given without a benchmark name is read as MedQA-style multiple choice
 * when its rows carry `options`, else as math with the gold in `answer`.
 */
import { InvalidArgument } from '../errors';
import { lastBoxed } from '../mas/answer';
import type { TaskKind } from '../mas/prompts';
import { loadRows, type LoadRowsOptions, type Row } from '../train/data/rows';
import { decodeLcbPrivateTests, parseLcbTests, type LcbTest } from './code';
import { shuffleGpqaOptions } from './pyrandom';
import { normalizeEm } from './score';

export type BenchmarkName = 'math500' | 'gpqa' | 'medqa' | 'mbppplus' | 'livecodebench' | 'aime25' | 'aime26' | 'bamboogle' | 'hotpotqa';

export interface BenchmarkSpec {
  /** Hugging Face dataset id; null when upstream reads a file of its own repository. */
  repo: string | null;
  config: string;
  split: string;
  task: TaskKind;
}

export const BENCHMARKS: Readonly<Record<BenchmarkName, BenchmarkSpec>> = {
  math500: { repo: 'HuggingFaceH4/MATH-500', config: 'default', split: 'test', task: 'math' },
  gpqa: { repo: 'Idavidrein/gpqa', config: 'gpqa_diamond', split: 'train', task: 'choice' },
  medqa: { repo: null, config: 'default', split: 'train', task: 'choice' },
  mbppplus: { repo: 'evalplus/mbppplus', config: 'default', split: 'test', task: 'code' },
  livecodebench: { repo: 'livecodebench/code_generation_lite', config: 'release_v6', split: 'test', task: 'code' },
  // release 2's own loaders (eval_datasets_extra.py) are unpublished: these take a local file
  aime25: { repo: null, config: 'default', split: 'test', task: 'math' },
  aime26: { repo: null, config: 'default', split: 'test', task: 'math' },
  bamboogle: { repo: null, config: 'default', split: 'test', task: 'math' },
  hotpotqa: { repo: null, config: 'default', split: 'validation', task: 'math' },
};
export const BENCHMARK_NAMES = Object.keys(BENCHMARKS) as BenchmarkName[];

export type EvalCheck =
  | { kind: 'math'; gold: string }
  | { kind: 'choice'; gold: string }
  | { kind: 'mbppplus'; test: string }
  | { kind: 'lcb'; tests: LcbTest[] }
  /** Search QA: exact match after normalisation against any of the gold answers. */
  | { kind: 'freeform'; gold: string[] };

export interface EvalItem {
  /** Row index in the dataset (upstream's sample_idx). */
  index: number;
  question: string;
  task: TaskKind;
  /** Code: the function the solution must define (its interface line). */
  fnName?: string;
  check: EvalCheck;
  /** What the row says it belongs to (MATH-500's subject and level, GPQA's domain, LiveCodeBench's difficulty), for per-group accuracy. */
  groups?: Record<string, string>;
  /** The LLM judge scores its answers too (bamboogle, hotpotqa, or the row's own `"judge": true`); exact match is kept beside it. */
  judge?: boolean;
}

/** Row fields that name a group, and the key they are reported under. */
const GROUP_FIELDS: readonly (readonly [string, string])[] = [
  ['subject', 'subject'],
  ['level', 'level'],
  ['High-level domain', 'domain'],
  ['difficulty', 'difficulty'],
];

function groupsOf(row: Row): Record<string, string> | undefined {
  const g: Record<string, string> = {};
  for (const [field, key] of GROUP_FIELDS) {
    const v = row[field];
    if ((typeof v === 'string' && v.trim()) || typeof v === 'number') g[key] = String(v).trim();
  }
  return Object.keys(g).length ? g : undefined;
}

export interface LoadBenchmarkOptions extends LoadRowsOptions {
  /** Rows from this JSON/JSONL file instead of the benchmark's source. */
  file?: string;
  split?: string;
  /** GPQA's option order depends on it (upstream's --seed). Default 42. */
  seed?: number;
  /** LiveCodeBench: also the private tests (upstream's --lcb_use_private_tests, default 1). */
  privateTests?: boolean;
  /** MBPP+: asserts shown in the question (upstream's --mbppplus_num_prompt_tests). Default 3. */
  promptTests?: number;
}

const CHOOSE = 'Choose the correct option (A/B/C/D).';
const LETTERS = ['A', 'B', 'C', 'D'] as const;

function text(row: Row, keys: readonly string[], where: string): string {
  for (const k of keys) {
    const v = row[k];
    if (typeof v === 'string' && v.trim() !== '') return v;
    if (typeof v === 'number') return String(v);
  }
  throw new InvalidArgument(
    `${where} has no ${keys.map((k) => `"${k}"`).join(' or ')} field (it has ${Object.keys(row).join(', ') || 'none'})`,
  );
}

async function readRows(file: string, opts: LoadRowsOptions): Promise<Row[]> {
  return /\.jsonl$/i.test(file) ? loadRows({ jsonlFile: file }, opts) : loadRows({ jsonFile: file }, opts);
}

/** A math gold: the boxed content when the field is a worked solution, else the field. */
function mathGold(answer: string): string {
  return (lastBoxed(answer) ?? answer).trim();
}

function mathItem(row: Row, index: number, where: string): EvalItem {
  return {
    index,
    question: text(row, ['problem', 'question'], where),
    task: 'math',
    check: { kind: 'math', gold: mathGold(text(row, ['answer'], where)) },
  };
}

async function gpqaItem(row: Row, index: number, seed: number, where: string): Promise<EvalItem> {
  const stem = text(row, ['Question'], where).trim();
  const correct = text(row, ['Correct Answer'], where).trim();
  const options = [correct, ...[1, 2, 3].map((k) => text(row, [`Incorrect Answer ${k}`], where).trim())];
  const shuffled = await shuffleGpqaOptions(seed, stem, options);
  const lines = shuffled.map((o, i) => `${LETTERS[i]}. ${o}`).join('\n');
  return {
    index,
    question: `${stem}\n\n${lines}\n\n${CHOOSE}`,
    task: 'choice',
    check: { kind: 'choice', gold: LETTERS[shuffled.indexOf(correct)]! },
  };
}

const LETTERED_LINE = /^\s*\(?[A-D][.):]\s/m;
const LEADING_LETTER = /^\s*\(?([A-D])\)?(?:[.:)\s]|$)/;

/** Options as [letter, text] pairs: an object keyed by letter, or a list in order. */
function optionList(v: unknown, where: string): [string, string][] {
  if (Array.isArray(v)) {
    return v.map((o, i) => {
      const s = String(o).trim();
      const m = LEADING_LETTER.exec(s);
      return m ? [m[1]!, s.replace(LEADING_LETTER, '').trim()] : [LETTERS[i] ?? String.fromCharCode(65 + i), s];
    });
  }
  if (v && typeof v === 'object')
    return Object.entries(v as Record<string, unknown>).map(([k, o]) => [k.trim().toUpperCase(), String(o).trim()]);
  if (v === undefined) return [];
  throw new InvalidArgument(`${where}: "options" must be a list or an object keyed by letter`);
}

/** MedQA's gold: the letter the answer names, else the option whose text it matches, else "A" (upstream's fallback). */
export function medqaGold(answer: string, options: readonly [string, string][]): string {
  const m = LEADING_LETTER.exec(answer);
  if (m && (answer.trim().length <= 3 || /^\s*\(?[A-D][.):]/.test(answer))) return m[1]!;
  const a = normalizeEm(answer);
  const exact = options.find(([, o]) => normalizeEm(o) === a);
  if (exact) return exact[0];
  const inside = options.find(([, o]) => a !== '' && (normalizeEm(o).includes(a) || a.includes(normalizeEm(o))));
  return inside ? inside[0] : 'A';
}

function medqaItem(row: Row, index: number, where: string): EvalItem {
  let question = text(row, ['query', 'question'], where).trim();
  const options = optionList(row.options, where);
  if (options.length && !LETTERED_LINE.test(question)) question += `\n${options.map(([k, o]) => `${k}. ${o}`).join('\n')}`;
  if (!question.includes(CHOOSE)) question += `\n\n${CHOOSE}`;
  return {
    index,
    question,
    task: 'choice',
    check: { kind: 'choice', gold: medqaGold(text(row, ['answer', 'answer_idx'], where), options) },
  };
}

/** The function a solution must define: the first name an assert calls, else the first def of the reference code. */
function mbppFnName(tests: readonly string[], code: string | undefined): string | undefined {
  for (const t of tests) {
    const m = /assert\s+(?:not\s+)?\(?\s*(?:set\(|math\.isclose\(|abs\()?\s*([A-Za-z_]\w*)\s*\(/.exec(t);
    if (m && !['set', 'math', 'abs', 'isinstance', 'len', 'sorted', 'round'].includes(m[1]!)) return m[1];
  }
  return code ? /^def\s+([A-Za-z_]\w*)/m.exec(code)?.[1] : undefined;
}

function mbppItem(row: Row, index: number, promptTests: number, where: string): EvalItem {
  const prompt = text(row, ['prompt', 'text'], where).trim();
  const tests = Array.isArray(row.test_list) ? row.test_list.map(String) : [];
  // the imports some test scripts rely on without making them (e.g. `import math`)
  const imports = Array.isArray(row.test_imports) ? row.test_imports.map(String).filter((l) => l.trim()) : [];
  const test = [...imports, text(row, ['test'], where)].join('\n');
  const fnName = mbppFnName(tests, typeof row.code === 'string' ? row.code : undefined);
  const shown = tests.slice(0, promptTests);
  const question = shown.length ? `${prompt}\n\nYour solution should satisfy assertions like:\n${shown.join('\n')}` : prompt;
  return { index, question, task: 'code', ...(fnName ? { fnName } : {}), check: { kind: 'mbppplus', test } };
}

async function lcbItem(row: Row, index: number, privateTests: boolean, where: string): Promise<EvalItem> {
  let question = text(row, ['question_content'], where).trim();
  const starter = typeof row.starter_code === 'string' ? row.starter_code.trim() : '';
  if (starter) question += `\n\nStarter code:\n${starter}`;
  const tests = parseLcbTests(text(row, ['public_test_cases'], where));
  if (privateTests && typeof row.private_test_cases === 'string' && row.private_test_cases !== '') {
    tests.push(...(await decodeLcbPrivateTests(row.private_test_cases)));
  }
  let fnName: string | undefined;
  const meta = row.metadata;
  try {
    const m =
      typeof meta === 'string' ? (JSON.parse(meta || '{}') as Record<string, unknown>) : (meta as Record<string, unknown> | undefined);
    if (m && typeof m.func_name === 'string' && m.func_name) fnName = m.func_name;
  } catch {
    throw new InvalidArgument(`${where}: "metadata" is not JSON`);
  }
  if (!tests.length) throw new InvalidArgument(`${where} has no test cases`);
  return { index, question, task: 'code', ...(fnName ? { fnName } : {}), check: { kind: 'lcb', tests } };
}

/** A search-QA row: its question and every accepted answer (a string, or a list of aliases). */
function qaItem(row: Row, index: number, where: string): EvalItem {
  const question = text(row, ['question', 'Question'], where).trim();
  const raw = row.answer ?? row.Answer ?? row.answers;
  const gold = (Array.isArray(raw) ? raw : [raw])
    .filter((g) => typeof g === 'string' || typeof g === 'number')
    .map((g) => String(g).trim())
    .filter(Boolean);
  if (!gold.length)
    throw new InvalidArgument(
      `${where} has no "answer", "Answer" or "answers" field with text (it has ${Object.keys(row).join(', ') || 'none'})`,
    );
  return { index, question, task: 'math', check: { kind: 'freeform', gold } };
}

/** Whether a row's answers go to the LLM judge: its own boolean `judge` field, else yes for search QA. */
function judgeOf(row: Row, name: BenchmarkName | null, where: string): boolean {
  const v = row.judge;
  if (v === undefined || v === null) return name === 'bamboogle' || name === 'hotpotqa';
  if (typeof v !== 'boolean') throw new InvalidArgument(`${where}: "judge" must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

/** Turns rows into questions with their checks; `name` null reads a plain file (MedQA-style with options, else math). */
export async function toItems(name: BenchmarkName | null, rows: readonly Row[], opts: LoadBenchmarkOptions = {}): Promise<EvalItem[]> {
  const items: EvalItem[] = [];
  for (const [i, row] of rows.entries()) {
    const where = `row ${i} of ${name ?? 'the dataset file'}`;
    switch (name) {
      case 'math500': case 'aime25': case 'aime26': items.push(mathItem(row, i, where)); break;
      case 'bamboogle': case 'hotpotqa': items.push(qaItem(row, i, where)); break;
      case 'gpqa': items.push(await gpqaItem(row, i, opts.seed ?? 42, where)); break;
      case 'medqa': items.push(medqaItem(row, i, where)); break;
      case 'mbppplus': items.push(mbppItem(row, i, opts.promptTests ?? 3, where)); break;
      case 'livecodebench': items.push(await lcbItem(row, i, opts.privateTests ?? true, where)); break;
      case null: items.push(row.options !== undefined ? medqaItem(row, i, where) : mathItem(row, i, where)); break;
    }
    const item = items[items.length - 1]!;
    const groups = groupsOf(row);
    if (groups) item.groups = groups;
    const judge = judgeOf(row, name, where);
    if (judge) {
      if (item.task === 'code') throw new InvalidArgument(`${where} asks for the LLM judge, but code is scored by running its tests`);
      item.judge = true;
    }
  }
  return items;
}

/** A benchmark's questions, by name (with an optional local file in place of its source) or from a file. */
export async function loadBenchmark(
  dataset: string,
  opts: LoadBenchmarkOptions = {},
): Promise<{ name: BenchmarkName | null; items: EvalItem[] }> {
  const name = (BENCHMARK_NAMES as readonly string[]).includes(dataset) ? (dataset as BenchmarkName) : null;
  let rows: Row[];
  if (name === null) {
    if (!/\.jsonl?$/i.test(dataset)) {
      throw new InvalidArgument(
        `--dataset ${dataset}: expected one of ${BENCHMARK_NAMES.join(', ')}, or a .json/.jsonl file of rows with question and answer`,
      );
    }
    if (opts.file) throw new InvalidArgument('--dataset_file goes with a benchmark name; --dataset is already a file');
    rows = await readRows(dataset, opts);
  } else if (opts.file) {
    rows = await readRows(opts.file, opts);
  } else {
    const spec = BENCHMARKS[name];
    if (!spec.repo) {
      throw new InvalidArgument(
        name === 'medqa'
          ? "medqa is read from a file of upstream's repository (inference/dataset/medqa.json); pass its path with --dataset_file"
          : `${name} has no published source this runner can name; pass a JSON/JSONL copy with --dataset_file (rows with ${spec.task === 'math' && !name.startsWith('aime') ? 'question and answer' : 'problem or question, and answer'})`,
      );
    }
    rows = await loadRows({ datasetName: spec.repo, config: spec.config, split: opts.split ?? spec.split }, opts);
  }
  return { name, items: await toItems(name, rows, opts) };
}
