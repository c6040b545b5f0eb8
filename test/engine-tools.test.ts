/**
 * Deliberation's tools through the engine API (workers/system-calls.ts) on the CPU backend: a tiny deliberation system
 * (scripts/tiny-system/tiny-mas.ts) whose tool-caller is made to write a Python call and then a search call (a scripted
 * generate in place of its first two decodes, since random weights never write tool tags; every other decode, the
 * continuations after each result and the answer retry included, is the model's). Each call is a pair of tool events
 * with its exact input and output, between the final stage's running and done events; the answer is the one `ask()`
 * gives on the same system with the same tool outputs; the search key reaches the search runner and no event.
 * Without maxNewTokens, each question's final decode gets the budget `rmas ask` gives its task (src/mas/budget.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, type GenerateOptions, type GenerateResult } from '../src/model/generate';
import type { Decoder } from '../src/model/decoder';
import { defaultMaxNewTokens } from '../src/mas/budget';
import { ask, type AskEngine, SINGLE_ENGINE } from '../src/mas/ask';
import { getStyle } from '../src/mas/styles';
import { loadSystemFromSpec } from '../src/mas/system-urls';
import { tavilySearchRunner, type ToolRunners } from '../src/mas/tools';
import { CpuBackend } from '../src/tensor/cpu';
import { loadTokenizerFromDir, type Tokenizer } from '../src/tokenizer';
import { buildTinySystem } from '../scripts/tiny-system/tiny-mas';
import { callRegistry } from '../workers/calls';
import type { EngineEvent, SystemSpec, ToolCallEvent } from '../workers/protocol';
import { systemCalls } from '../workers/system-calls';
import { FILES_HOST, diskFetchFile } from './util/files';

const tmp = mkdtempSync(join(tmpdir(), 'engine-tools-'));
const host = FILES_HOST;
const fetchFile = diskFetchFile;
const cpu = new CpuBackend('f32');

const CODE = 'print(sum(range(10)))';
/** What the Python tool answers for CODE (the Node runner's and Pyodide's text: src/mas/tools/python.cases.ts). */
const PY_OUT = '45';
const QUERY = 'capital of France';
const NO_KEY = `[search disabled] Web search is disabled because no API key was given (query: ${QUERY}). ` +
  'Enter a Tavily API key to enable the search tool.';
const SCRIPTS = [`Let me compute. <python>${CODE}</python>`, ` Now look it up. <search>${QUERY}</search>`];

let tok: Tokenizer;
let spec: SystemSpec;

/**
 * The final decode's first two calls write SCRIPTS token by token (stopping where the engine's stop callback says, as
 * generate does); every later call is the real generate.
 */
function scriptedEngine(): AskEngine {
  let calls = 0;
  const gen = async (m: Decoder, o: GenerateOptions): Promise<GenerateResult> => {
    if (!o.inputsEmbeds || calls >= SCRIPTS.length) return generate(m, o);
    const script = tok.encode(SCRIPTS[calls++]!, { addSpecialTokens: false });
    const tokens: number[] = [];
    const done = (stoppedBy: GenerateResult['stoppedBy']): GenerateResult =>
      ({ tokens, stoppedBy, prefillMs: 0, decodeMs: 0, prefillTokensPerSec: 0, decodeTokensPerSec: 0, decodeCounters: null });
    for (const id of script) {
      tokens.push(id);
      o.onToken?.(id);
      if (o.stop?.(tokens)) return done('stop');
    }
    return done('length');
  };
  return { rollout: SINGLE_ENGINE.rollout, generate: gen };
}

const REQ = { question: 'What is 0 + 1 + ... + 9?', mode: 'latent' as const, rounds: 2, latentSteps: 3, maxNewTokens: 64 };

beforeAll(async () => {
  const sys = await buildTinySystem('deliberation', join(tmp, 'delib'));
  tok = await loadTokenizerFromDir(sys.roles.toolcaller!);
  spec = {
    style: 'deliberation',
    roles: Object.fromEntries(Object.entries(sys.roles).map(([r, d]) => [r, { model: `${host}${d}/` }])),
    outerRepo: `${host}${sys.outer}/`,
  };
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('engine api: deliberation with its tools (cpu, tiny system)', () => {
  it('each tool call is a running and a done event with its exact input and output; the answer is ask()\'s', async () => {
    let engine = scriptedEngine();
    const ran: string[] = [];
    const python: ToolRunners['python'] = async (code, { timeoutMs }) => (ran.push(`${code} (${timeoutMs} ms)`), PY_OUT);
    const api = systemCalls({
      backend: async () => ({ backend: cpu }), fetchFile, python,
      engine: { rollout: (...a) => engine.rollout(...a), generate: (...a) => engine.generate(...a) },
    }, callRegistry());
    const ev: EngineEvent[] = [];
    let r;
    try {
      r = await api.ask({ system: spec, ...REQ, sampling: { greedy: true } }, (e) => void ev.push(e));
    } finally {
      api.dispose();
    }
    expect(ran).toEqual([`${CODE} (10000 ms)`]);

    const tools = ev.filter((e): e is ToolCallEvent => e.type === 'tool');
    const where = { type: 'tool', round: 2, role: 'toolcaller' };
    expect(tools.map((e) => (e.state === 'done' ? { ...e, seconds: 0 } : e))).toEqual([
      { ...where, index: 0, tool: 'python', input: CODE, state: 'running' },
      { ...where, index: 0, tool: 'python', input: CODE, state: 'done', output: PY_OUT, seconds: 0 },
      { ...where, index: 1, tool: 'search', input: QUERY, state: 'running' },
      { ...where, index: 1, tool: 'search', input: QUERY, state: 'done', output: NO_KEY, seconds: 0 },
    ]);
    expect(tools.every((e) => e.state === 'running' || (e.seconds >= 0 && e.seconds < 5))).toBe(true);
    // under the final stage: after it starts, before it is done
    const stage = (state: string) =>
      ev.findIndex((e) => e.type === 'stage' && e.round === 2 && e.role === 'toolcaller' && e.state === state);
    expect(stage('running')).toBeLessThan(ev.indexOf(tools[0]!));
    expect(ev.indexOf(tools.at(-1)!)).toBeLessThan(stage('done'));

    const first = `${SCRIPTS[0]} <result> ${PY_OUT} </result>${SCRIPTS[1]} <result> ${NO_KEY} </result>`;
    expect(r.text.startsWith(first)).toBe(true);
    expect(r.text.length).toBeGreaterThan(first.length); // the model went on after the results

    // ask() itself on the same system, engine and tool outputs
    engine = scriptedEngine();
    const system = await loadSystemFromSpec(spec, cpu, { fetchFile });
    try {
      const want = await ask(system, {
        ...REQ, sampling: { greedy: true }, answerRetry: true,
        tools: { python: async () => PY_OUT, search: tavilySearchRunner({}) },
      }, engine);
      expect({ answer: r.answer, text: r.text, tokens: r.tokens }).toEqual({ answer: want.answer, text: want.text, tokens: want.tokens });
      expect(want.toolCalls).toEqual([
        { tool: 'python', body: CODE, result: PY_OUT },
        { tool: 'search', body: QUERY, result: NO_KEY },
      ]);
    } finally {
      system.dispose();
    }
  });

  it('the search key reaches the search runner only; without a Python runner the call says so', async () => {
    const keys: (string | undefined)[] = [];
    const engine = scriptedEngine();
    const api = systemCalls({
      backend: async () => ({ backend: cpu }), fetchFile, engine,
      search: (key) => (keys.push(key), async (q) => `hits for ${q}`),
    }, callRegistry());
    const ev: EngineEvent[] = [];
    try {
      const req = { system: spec, ...REQ, sampling: { greedy: true }, answerRetry: false, searchKey: ' tvly-secret ' };
      await api.ask(req, (e) => void ev.push(e));
    } finally {
      api.dispose();
    }
    expect(keys).toEqual(['tvly-secret']);
    const outputs = ev.flatMap((e) => (e.type === 'tool' && e.state === 'done' ? [e.output] : []));
    expect(outputs).toEqual(['[python tool disabled] No Python runner was given to this run.', `hits for ${QUERY}`]);
    expect(JSON.stringify(ev)).not.toContain('tvly-secret');
  });
});

describe('engine api: the default token budget (cpu, tiny deliberation system)', () => {
  it("without maxNewTokens, the question and its donor each get rmas ask's budget for their task", async () => {
    const budgets: number[] = [];
    // the final decode records its budget and ends at once: no token of a 2000-token budget is generated
    const generate: AskEngine['generate'] = async (_m, o) => (budgets.push(o.maxNewTokens), {
      tokens: [], stoppedBy: 'eos', prefillMs: 0, decodeMs: 0, prefillTokensPerSec: 0, decodeTokensPerSec: 0, decodeCounters: null,
    });
    const api = systemCalls({ backend: async () => ({ backend: cpu }), fetchFile, engine: { rollout: SINGLE_ENGINE.rollout, generate } },
      callRegistry());
    const choice = 'Which is even?\nA. 3\nB. 4';
    try {
      const req = { system: spec, question: 'What is 2 + 3?', mode: 'latent' as const, rounds: 1, latentSteps: 2, answerRetry: false };
      await api.ask({ ...req, ablation: { kind: 'from', question: choice } }, () => {});
    } finally {
      api.dispose();
    }
    const style = getStyle('deliberation');
    expect(budgets).toEqual([defaultMaxNewTokens(style, { task: 'choice' }), defaultMaxNewTokens(style, { task: 'math' })]);
    expect(budgets).toEqual([4000, 2000]);
  });
});
