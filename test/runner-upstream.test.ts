/**
 * Upstream's inference command lines with only the program name replaced (issue 22): run.py's flags on
 * `rmas run` (--batch_size, --trust_remote_code, --device, --dtype, --enable_thinking, --do_sample, --ans,
 * --tavily_keys_file, --tavily_sentinel_file) and run_custom.py's on `rmas ask` (-q, --questions_file,
 * --task reasoning, --output_jsonl), each checked for its effect. In-process (main, runCmd, askCmd) on the
 * tiny upstream-layout systems (scripts/tiny-system/tiny-mas.ts), CPU; --device cuda:1 also on the CUDA emulator.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_PROMPTS, userPrompt } from '../src/mas/prompts';
import { SLOTS } from '../src/mas/slots';
import { deviceFlag } from '../src/runner/cli';
import { REASONING_FINAL_INSTRUCTION, parseQuestionsFile, reasoningPrompts } from '../src/runner/custom';
import { searchTool } from '../src/runner/run-cmd';
import { CpuBackend } from '../src/tensor/cpu';
import { loadTokenizerFromDir } from '../src/tokenizer';
import { TINY_MAS_ROLES } from '../scripts/tiny-system/tiny-mas';
import { overridesFor, readDump, runAsk } from './mas/ask-util';
import { rmasInProcess as rmas } from './util/rmas';

const ROOT = resolve(import.meta.dirname, '..');
const tmp = mkdtempSync(join(tmpdir(), 'rmas-upstream-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());
const cpu = new CpuBackend('f32');
const EMPTY_THINK = '<think>\n\n</think>';
/** The tiny run's settings (few latent steps, a few tokens, one round). */
const SMALL = ['--num_recursive_rounds', '1', '--latent_length', '2', '--max_new_tokens', '4'];
const small = { num_recursive_rounds: '1', latent_length: '2', max_new_tokens: '4' };

let seq: string[] = [];
const data = join(tmp, 'rows.jsonl');
beforeAll(async () => {
  seq = await overridesFor('sequential_light', join(tmp, 'seq'));
  writeFileSync(
    data,
    ['What is 2 + 3?', 'What is 7 - 4?'].map((q, i) => JSON.stringify({ question: q, answer: String([5, 3][i]) })).join('\n'),
  );
});
const ckpt = (o: string[]) => o.flatMap((x) => ['--ckpt_override', x]);

const jsonl = (file: string) => readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

describe('--device: upstream\'s spelling of --backend and --devices', () => {
  it('cuda:N is the cuda backend on device N, cuda and cpu the backends; a contradicting --backend or --devices is refused by name', () => {
    const usage = (m: string) => new Error(m);
    expect(deviceFlag({ device: 'cuda:1' }, usage)).toEqual({ backend: 'cuda', devices: '1' });
    expect(deviceFlag({ device: 'cuda', devices: '0,1' }, usage)).toEqual({ backend: 'cuda', devices: '0,1' });
    expect(deviceFlag({ device: 'cpu', backend: 'cpu' }, usage)).toEqual({ backend: 'cpu', devices: undefined });
    expect(deviceFlag({ backend: 'webgpu' }, usage)).toEqual({ backend: 'webgpu', devices: undefined });
    expect(() => deviceFlag({ device: 'cuda:1', backend: 'cpu' }, usage)).toThrow(
      '--device cuda:1 asks for the cuda backend but --backend is cpu; give one of them',
    );
    expect(() => deviceFlag({ device: 'cuda:1', devices: '0' }, usage)).toThrow(
      '--device cuda:1 picks CUDA device 1 but --devices is 0; give one of them',
    );
    expect(() => deviceFlag({ device: 'gpu' }, usage)).toThrow('--device gpu: expected cuda, cpu or cuda:N');
  });

  it('on the command line: the conflict is a usage error (exit 2), --device cpu runs on the CPU', async () => {
    const bad = await rmas('run', '--style', 'sequential_light', '--dataset', data, '--device', 'cuda:1', '--backend', 'cpu');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('rmas: --device cuda:1 asks for the cuda backend but --backend is cpu');
    const ok = await rmas(
      'ask',
      '-q',
      'What is 1 + 1?',
      '--style',
      'sequential_light',
      ...ckpt(seq),
      ...SMALL,
      '--greedy',
      '--device',
      'cpu',
      '--json',
    );
    expect(ok.code, ok.err).toBe(0);
    expect(ok.err).toMatch(/backend: cpu \(f32, wasm simd(, fma)?(, \d+ threads)?\)\n/); // threads: the machine's cores
  });

  const emu = join(ROOT, 'native/cuda/build-emu/rmas_cuda.node');
  it.skipIf(!existsSync(emu))('--device cuda:1 runs on CUDA device 1 (the CUDA emulator with three devices)', () => {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RMAS_CUDA')));
    const r = spawnSync(
      process.execPath,
      [
        join(ROOT, 'bin/rmas.js'),
        'forward',
        '--model',
        'models/tiny/qwen3-tiny',
        '--ids',
        '1,2,3',
        '--out',
        join(tmp, 'fw.safetensors'),
        '--device',
        'cuda:1',
      ],
      {
        cwd: ROOT,
        encoding: 'utf8',
        env: { ...base, RMAS_CUDA_ADDON: emu, RMAS_CUDA_EMU_DEVICES: '3' },
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('backend: cuda (rmas CUDA emulator (CPU) 1, sm_');
  });
});

describe('rmas run with run.py\'s flags', () => {
  it('upstream\'s documented command line runs (--device cpu for cuda); --batch_size is recorded; the run is the plain run', async () => {
    const file = join(tmp, 'upstream.jsonl');
    const r = await rmas(
      'run',
      '--style',
      'sequential_light',
      '--batch_size',
      '32',
      '--temperature',
      '0.6',
      '--top_p',
      '0.95',
      '--dataset',
      data,
      '--seed',
      '42',
      '--trust_remote_code',
      '1',
      '--device',
      'cpu',
      '--dtype',
      'auto',
      '--enable_thinking',
      '0',
      '--do_sample',
      '--ans',
      ...ckpt(seq),
      ...SMALL,
      '--num_samples',
      '1',
      '--result_jsonl',
      file,
    );
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^accuracy=\d+\.\d\d%\n$/);
    // on the CPU questions are asked one after another (batched steps are WebGPU's), with the same answers
    expect(r.err).not.toMatch(/batch/);
    const [config, sample] = jsonl(file);
    expect([config.batch_size, config.enable_thinking, config.answer_retry]).toEqual([32, false, true]);
    // the same question without run.py's extra flags: the same record
    const plain = join(tmp, 'plain.jsonl');
    expect(
      (
        await rmas(
          'run',
          '--style',
          'sequential_light',
          '--dataset',
          data,
          '--backend',
          'cpu',
          ...ckpt(seq),
          ...SMALL,
          '--num_samples',
          '1',
          '--result_jsonl',
          plain,
        )
      ).code,
    ).toBe(0);
    const [c2, s2] = jsonl(plain);
    expect(c2.batch_size).toBe(8); // upstream's default
    expect([s2.raw_output, s2.tokens]).toEqual([sample.raw_output, sample.tokens]);
    // --resume does not compare batch_size: questions get the same answers whatever it is
    const resumed = await rmas(
      'run',
      '--style',
      'sequential_light',
      '--dataset',
      data,
      '--backend',
      'cpu',
      ...ckpt(seq),
      ...SMALL,
      '--num_samples',
      '2',
      '--result_jsonl',
      plain,
      '--resume',
      '--batch_size',
      '4',
    );
    expect(resumed.code, resumed.err).toBe(0);
    expect(jsonl(plain).filter((x) => x.type === 'sample')).toHaveLength(2);
  }, 60_000);

  it('contradictions and bad values are usage errors; --dtype other than auto is a note', async () => {
    const base = [
      'run',
      '--style',
      'sequential_light',
      '--dataset',
      data,
      '--backend',
      'cpu',
      ...ckpt(seq),
      ...SMALL,
      '--num_samples',
      '1',
    ];
    for (const [extra, msg] of [
      [['--do_sample', '--greedy'], '--do_sample (sampling, the default) and --greedy contradict each other'],
      [['--ans', '--no_ans'], '--ans (the answer retry, the default) and --no_ans contradict each other'],
      [['--trust_remote_code', '2'], '--trust_remote_code 2: expected 0 or 1'],
      [['--enable_thinking', 'yes'], '--enable_thinking yes: expected 0 or 1'],
      [['--batch_size', '0'], '--batch_size 0: expected an integer >= 1'],
      [['--dtype', 'fp8'], '--dtype fp8: expected auto, float32, float16 or bfloat16'],
    ] as [string[], string][]) {
      const r = await rmas(...base, ...extra);
      expect(r.code, extra.join(' ')).toBe(2);
      expect(r.err).toContain(msg);
    }
    const note = await rmas(...base, '--dtype', 'bfloat16', '--greedy');
    expect(note.code).toBe(0);
    expect(note.err).toContain('note: --dtype bfloat16 only tunes PyTorch');
  }, 60_000);
});

describe('--tavily_keys_file and --tavily_sentinel_file', () => {
  const KEYS = ['tvly-dev-QUOTA0000000000000000', 'tvly-dev-LIMIT1111111111111111', 'tvly-dev-GOOD22222222222222222'];
  const keysFile = join(tmp, 'keys.txt');
  beforeAll(() => writeFileSync(keysFile, `# rotation test\n${KEYS[0]}\n\n${KEYS[1]}\n${KEYS[2]}\n`));
  const leaked = (s: string) => KEYS.filter((k) => s.includes(k));

  async function server(answer: (key: string) => number) {
    const seen: string[] = [];
    const srv = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const key = String(req.headers.authorization).replace('Bearer ', '');
        seen.push(key);
        const status = answer(key);
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(
          JSON.stringify(
            status === 200 ? { results: [{ title: 'Paris', url: 'https://p.test', content: 'capital' }] } : { detail: { error: 'no' } },
          ),
        );
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    return {
      url: `http://127.0.0.1:${(srv.address() as { port: number }).port}/search`,
      seen,
      close: () => new Promise<void>((r) => srv.close(() => r())),
    };
  }

  it('the search tool of rmas run rotates the file\'s keys (432, then 429, then the third answers); no key is printed', async () => {
    const srv = await server((k) => (k === KEYS[0] ? 432 : k === KEYS[1] ? 429 : 200));
    let err = '';
    try {
      const search = searchTool({ tavily_keys_file: keysFile }, (s) => (err += s), { url: srv.url });
      const out = await search('capital of France', {});
      expect(out).toContain('[1] Paris');
      expect(srv.seen).toEqual(KEYS);
      expect(err).toContain(`search: 3 Tavily key(s) from ${keysFile}`);
      expect(err).toContain('search: Tavily key 1 of 3 was refused (HTTP 432');
      expect(err).toContain('search: Tavily key 2 of 3 was refused (HTTP 429');
      expect(leaked(out + err)).toEqual([]);
    } finally {
      await srv.close();
    }
  });

  it('when every key is refused the sentinel file is written, without keys; errors name the file, never a key', async () => {
    const srv = await server(() => 401);
    const sentinel = join(tmp, 'exhausted.sentinel');
    let err = '';
    try {
      const search = searchTool({ tavily_keys_file: keysFile, tavily_sentinel_file: sentinel }, (s) => (err += s), { url: srv.url });
      const out = await search('q', {});
      expect(out).toContain('every Tavily key (3) was refused');
      const text = readFileSync(sentinel, 'utf8');
      expect(text).toMatch(
        /^\d{4}-\d\d-\d\dT.* all 3 Tavily keys were refused or are over their limits \(the last: HTTP 401 Unauthorized\) \(.*keys\.txt\)\n$/,
      );
      expect(err).toContain(`wrote ${sentinel}`);
      expect(leaked(out + err + text)).toEqual([]);
    } finally {
      await srv.close();
    }
    const empty = join(tmp, 'empty-keys.txt');
    writeFileSync(empty, '# none yet\n\n');
    expect(() => searchTool({ tavily_keys_file: empty }, () => {})).toThrow(`--tavily_keys_file ${empty} holds no key`);
    expect(() => searchTool({ tavily_keys_file: join(tmp, 'missing.txt') }, () => {})).toThrow(/cannot read it \(ENOENT\)/);
  });

  it('rmas run --style deliberation with a keys file: the keys appear in no output and no file', async () => {
    const o = await overridesFor('deliberation', join(tmp, 'delib'));
    const file = join(tmp, 'delib.jsonl');
    const sentinel = join(tmp, 'delib.sentinel');
    const r = await rmas(
      'run',
      '--style',
      'deliberation',
      '--dataset',
      data,
      '--backend',
      'cpu',
      ...ckpt(o),
      ...SMALL,
      '--num_samples',
      '1',
      '--greedy',
      '--tavily_keys_file',
      keysFile,
      '--tavily_sentinel_file',
      sentinel,
      '--result_jsonl',
      file,
    );
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain('search: 3 Tavily key(s)');
    expect(leaked(r.out + r.err + readFileSync(file, 'utf8'))).toEqual([]);
  }, 60_000);
});

describe('rmas ask with run_custom.py\'s flags', () => {
  const QS = ['What is 2 + 3?', 'What is 7 - 4?', 'Name a prime above 10.'];

  it('parseQuestionsFile reads run_custom.py\'s formats', () => {
    expect(parseQuestionsFile(`${QS[0]}\n${QS[1]}\n\n${QS[2]}\n`, 'q.txt')).toEqual([
      { question: `${QS[0]}\n${QS[1]}` },
      { question: QS[2] },
    ]);
    expect(parseQuestionsFile(`${QS[0]}\n  ${QS[1]}\n`, 'q.txt')).toEqual([{ question: QS[0] }, { question: QS[1] }]);
    expect(parseQuestionsFile(JSON.stringify([QS[0], { query: QS[1] }, { question: QS[2], fn_name: 'f' }]), 'q.json'))
      .toEqual([{ question: QS[0] }, { question: QS[1] }, { question: QS[2], fnName: 'f' }]);
    expect(parseQuestionsFile(JSON.stringify({ questions: [QS[0]] }), 'q.json')).toEqual([{ question: QS[0] }]);
    expect(parseQuestionsFile(`${JSON.stringify({ question: QS[0] })}\n\n${QS[1]}\n"${QS[2]}"\n`, 'q.jsonl')).toEqual(
      QS.map((question) => ({ question })),
    );
    expect(() => parseQuestionsFile(JSON.stringify([{ answer: 1 }]), 'q.json')).toThrow('q.json item 1: an object without a question');
  });

  it('--questions_file (txt, json, jsonl) → --output_jsonl: ' +
    'one record per question, each what rmas ask --json prints for it, with its index', async () => {
    const flags = { style: 'sequential_light', ckpt_override: seq, greedy: true, ...small };
    const single: Record<string, unknown>[] = [];
    for (const q of QS) {
      const r = await runAsk({ ...flags, question: q, json: true }, cpu);
      expect(r.error).toBeNull();
      single.push(JSON.parse(r.out) as Record<string, unknown>);
    }
    const files: Record<string, string> = {
      'q.txt': `${QS.join('\n')}\n`,
      'q.json': JSON.stringify([QS[0], { question: QS[1] }, { question: QS[2], id: 7 }]),
      'q.jsonl': QS.map((question) => JSON.stringify({ question })).join('\n'),
    };
    for (const [name, text] of Object.entries(files)) {
      const path = join(tmp, name);
      writeFileSync(path, text);
      // in a folder that does not exist yet: it is made
      const out = join(tmp, `out-${name}`, 'answers.jsonl');
      const r = await runAsk({ ...flags, questions_file: path, output_jsonl: out }, cpu);
      expect(r.error, name).toBeNull();
      expect(existsSync(`${out}.partial`)).toBe(false);
      const recs = jsonl(out);
      expect(
        recs.map((x) => [x.index, x.question]),
        name,
      ).toEqual(QS.map((q, i) => [i, q]));
      recs.forEach((rec, i) => {
        const { seconds: _s, ...want } = single[i];
        const { seconds: _t, index: _i, question: _q, ...got } = rec;
        expect(got, `${name} question ${i}`).toEqual(want);
      });
    }
    // -q repeated, with --json: a line per question
    const many = await rmas(
      'ask',
      '-q',
      QS[0],
      '-q',
      QS[1],
      '--style',
      'sequential_light',
      ...ckpt(seq),
      ...SMALL,
      '--greedy',
      '--backend',
      'cpu',
      '--json',
    );
    expect(many.code, many.err).toBe(0);
    expect(
      many.out
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { text: string }).text),
    ).toEqual([single[0].text, single[1].text]);
  }, 60_000);

  it('--task reasoning: the reasoning prompts, no answer retry, the whole text as the answer', async () => {
    const dump = join(tmp, 'reasoning-dump');
    const r = await runAsk(
      {
        style: 'sequential_light',
        ckpt_override: seq,
        question: 'Why is the sky blue?',
        task: 'reasoning',
        greedy: true,
        ...small,
        json: true,
        dump,
      },
      cpu,
    );
    expect(r.error).toBeNull();
    expect(r.err).toContain('task reasoning (math links)');
    const rec = JSON.parse(r.out) as { answer: string; text: string };
    expect(rec.answer).toBe(rec.text.trim());
    const stages = await readDump(dump);
    const text = async (role: string) => {
      const s = stages.find((x) => x.role === role)!;
      const tok = await loadTokenizerFromDir(join(tmp, 'seq', `sequential_light-${role}`));
      return [...s.tensors].filter(([k]) => k.startsWith('ids.')).map(([, t]) => tok.decode(Array.from(t.values))).join('<slot>');
    };
    expect(await text('planner')).toContain('You are the planner in a multi-agent reasoning team.');
    const solver = await text('solver');
    expect(solver).toContain('Give a clear, careful answer in natural language');
    expect(solver).not.toContain('\\boxed');
    // the math task's answer retry would have run on this boxless text; reasoning has none
    const math = await runAsk(
      { style: 'sequential_light', ckpt_override: seq, question: 'Why is the sky blue?', greedy: true, ...small },
      cpu,
    );
    expect(math.err).toContain('(answer retry ran)');
    const plain = await runAsk(
      { style: 'sequential_light', ckpt_override: seq, question: 'Why is the sky blue?', task: 'reasoning', greedy: true, ...small },
      cpu,
    );
    expect(plain.err).not.toContain('answer retry ran');
  }, 60_000);

  it("reasoningPrompts: chain roles reworded, other styles' final instruction replaced, deliberation's system prompt unboxed, " +
    'a --prompts wording kept', () => {
    const set = reasoningPrompts(DEFAULT_PROMPTS);
    const vars = { question: 'Why?', task: 'math' as const, round: 1 };
    expect(userPrompt('distill', 'learner', 'first', vars, set)).toContain(REASONING_FINAL_INSTRUCTION);
    expect(userPrompt('distill', 'learner', 'first', vars, set)).not.toContain('\\boxed');
    expect(userPrompt('chain', 'critic', 'first', vars, set)).toContain(`Initial Plan:\n${SLOTS.planner}`);
    expect(set.system.deliberation).toMatch(/give a clear final response in natural language\.$/);
    expect(set.system.deliberation).not.toContain('\\boxed');
    const mine = {
      ...DEFAULT_PROMPTS,
      templates: { ...DEFAULT_PROMPTS.templates, 'chain.solver.first': `MINE ${SLOTS.refined} {question} {final_instruction}` },
    };
    expect(userPrompt('chain', 'solver', 'first', vars, reasoningPrompts(mine))).toBe(
      `MINE ${SLOTS.refined} Why? ${REASONING_FINAL_INSTRUCTION}`,
    );
  });

  it('--enable_thinking 1 drops the empty think block of the Qwen3 planner\'s prompt; 0 (the default) keeps it', async () => {
    const planner = async (extra: Record<string, string>) => {
      const dump = join(tmp, `think-${Object.values(extra).join('') || 'default'}`);
      const r = await runAsk(
        { style: 'sequential_light', ckpt_override: seq, question: 'What is 1 + 1?', greedy: true, ...small, dump, ...extra },
        cpu,
      );
      expect(r.error).toBeNull();
      const s = (await readDump(dump)).find((x) => x.role === 'planner')!;
      const tok = await loadTokenizerFromDir(join(tmp, 'seq', `sequential_light-planner`));
      return tok.decode(Array.from(s.tensors.get('ids.0')!.values));
    };
    expect(TINY_MAS_ROLES.sequential_light.planner).toBe('qwen3-tiny');
    expect(await planner({})).toContain(EMPTY_THINK);
    expect(await planner({ enable_thinking: '1' })).not.toContain(EMPTY_THINK);
    expect(await planner({ enable_thinking: '0' })).toContain(EMPTY_THINK);
  }, 60_000);
});
