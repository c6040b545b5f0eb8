/**
 * Code-benchmark scoring (docs/method.md §7.4), Node only: the answer's first ```python block is run by `python3` in a
 * fresh sandboxed process and folder (src/mas/tools/python-node.ts) against MBPP+ test scripts or LiveCodeBench
 * tests, which are decoded here from the dataset's base64 → zlib → pickle → JSON field. What decides a verdict never
 * enters the answer's reach: stdin tests compare the output here, the others go through code-harness.ts.
 */
import { Cancelled, InvalidArgument } from '../errors';
import { stripThink } from '../mas/answer';
import { spawnPython } from '../mas/tools/python-node';
import { SandboxUnavailable, type SandboxOptions } from '../mas/tools/sandbox';
import { nodeImport } from '../util/node-import';
import { ANSWER_HOST, VERDICT_HOST } from './code-harness';

export interface ProgramResult {
  /** null when the process was killed (timeout) rather than exiting. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** Characters kept per stream: LiveCodeBench outputs run to megabytes, a runaway loop should not fill memory. */
const MAX_PROGRAM_OUTPUT = 32 << 20;

/** How code answers are run: the interpreter, the sandbox's options, a cancel signal. */
export interface CodeRunOptions {
  python?: string;
  signal?: AbortSignal;
  sandbox?: SandboxOptions;
}

/**
 * Runs `source` as `python3 main.py` in a fresh temporary folder (so that the program's own stdin is
 * `opts.stdin`), with a stripped environment, in its sandbox killed on timeout or abort. Throws InvalidArgument
 * when the interpreter is missing, SandboxUnavailable where no sandbox can be made, Cancelled when `signal` aborts.
 */
export async function runPythonProgram(
  source: string,
  opts: CodeRunOptions & { stdin?: string; timeoutMs: number; files?: Record<string, string>; args?: string[] },
): Promise<ProgramResult> {
  const python = opts.python ?? 'python3';
  let r;
  try {
    r = await spawnPython({
      python, args: opts.args ?? ['main.py'], files: { ...opts.files, 'main.py': source }, stdin: opts.stdin ?? '',
      timeoutMs: opts.timeoutMs, signal: opts.signal, maxOutputChars: MAX_PROGRAM_OUTPUT, sandbox: opts.sandbox,
    });
  } catch (e) {
    if (e instanceof SandboxUnavailable) throw e;
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') {
      throw new InvalidArgument(
        `the Python interpreter \`${python}\` was not found; code benchmarks run the answers with it. ` +
          'Install Python 3 (for example `apt-get install python3`, or from python.org) or pass its path as the python option.',
      );
    }
    throw new InvalidArgument(`could not start the Python interpreter \`${python}\`: ${err.message}`);
  }
  if (r.aborted) throw new Cancelled('cancelled while running a code answer');
  return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut };
}

/**
 * Upstream's clean_raw_output: drop `<think>` blocks, take the first ```python (or py, python3) block,
 * else the first bare ``` block; fences pair up in order, an unclosed block runs to the end (as after a
 * cut-off answer retry), blank blocks are skipped, and a leading `python` line is removed. Blocks in other
 * languages are never taken. null when there is no such block.
 */
export function extractCode(text: string): string | null {
  const t = stripThink(text);
  const blocks: { lang: string; body: string }[] = [];
  const fence = /```([^\n`]*)/g;
  for (let open = fence.exec(t); open; open = fence.exec(t)) {
    const [lang = '', ...rest] = open[1]!.trim().split(/\s+/);
    const close = fence.exec(t);
    const body = rest.join(' ') + t.slice(open.index + open[0].length, close ? close.index : t.length);
    const code = body.replace(/^[ \t]*\r?\n/, '').replace(/^[ \t]*python[ \t]*(?:\r?\n|$)/i, '');
    blocks.push({ lang: lang.toLowerCase(), body: code });
    if (!close) break;
  }
  const usable = blocks.filter((b) => b.body.trim() !== '');
  const block = usable.find((b) => ['python', 'py', 'python3'].includes(b.lang)) ?? usable.find((b) => b.lang === '');
  return block ? block.body.trimEnd() + '\n' : null;
}

const PRELUDE_MODULES = [
  'string', 're', 'datetime', 'collections', 'heapq', 'bisect', 'copy', 'math', 'random', 'statistics',
  'itertools', 'functools', 'operator', 'io', 'sys', 'json', 'builtins', 'typing',
];

/**
 * Put before MBPP+ and LiveCodeBench answers, as upstream and LiveCodeBench do: answers use names such as
 * `List`, `Counter` or `gcd` without importing them. `builtins` comes after `math` so that `pow` stays the builtin.
 */
export const MBPP_IMPORT_PRELUDE =
  PRELUDE_MODULES.map((m) => `from ${m} import *\n`).join('') +
  PRELUDE_MODULES.map((m) => `import ${m}\n`).join('') +
  'sys.setrecursionlimit(50000)\n';

/** The last few lines of stderr, for a result's `detail`. */
function tail(stderr: string, chars = 300): string {
  const s = stderr.trimEnd();
  return s.length <= chars ? s : '…' + s.slice(-chars);
}

export interface MbppResult {
  passed: boolean;
  exitCode: number | null;
  timedOut: boolean;
  /** "timeout", or the tail of stderr (empty on a clean pass). */
  detail: string;
}

/**
 * Runs the answer and the test through code-harness.ts: passed ⇔ the verdict host's line is `<nonce> pass`.
 * `spec` holds what the answer must not see (the test script, the expected value); the nonce is added here.
 */
async function runVerdict(code: string, spec: Record<string, string>, opts: CodeRunOptions & { timeoutMs: number }) {
  const nonce = `rmas-verdict-${crypto.randomUUID()}`;
  const stdin = JSON.stringify({ ...spec, nonce, prelude: MBPP_IMPORT_PRELUDE, host: ANSWER_HOST });
  const r = await runPythonProgram(VERDICT_HOST, { ...opts, args: ['main.py'], files: { 'answer.py': code }, stdin });
  const line = r.stdout.trim();
  const verdict = line.startsWith(`${nonce} `) && !line.includes('\n') ? line.slice(nonce.length + 1) : '';
  return { ...r, verdict };
}

/**
 * MBPP+: the dataset's `test` script run in the verdict host against the answer's functions (default limit 10 s);
 * passed ⇔ the script ran to its end, the harness says so (never an exit code alone).
 */
export async function scoreMbppPlus(
  code: string,
  testScript: string,
  opts: CodeRunOptions & { timeoutMs?: number } = {},
): Promise<MbppResult> {
  const r = await runVerdict(code, { kind: 'mbpp', test: testScript }, { ...opts, timeoutMs: opts.timeoutMs ?? 10_000 });
  const passed = !r.timedOut && r.verdict === 'pass' && r.exitCode === 0;
  return {
    passed,
    exitCode: r.exitCode,
    timedOut: r.timedOut,
    detail: r.timedOut ? 'timeout' : tail(r.stderr),
  };
}

export interface LcbTest {
  input: string;
  output: string;
  testtype: 'stdin' | 'functional';
}

export interface LcbResult {
  passed: boolean;
  /** Tests passed before the first failure (scoring stops there). */
  passedTests: number;
  totalTests: number;
  /** Which test failed and why ("timeout", "wrong answer", stderr tail); empty when all passed. */
  detail: string;
}

/**
 * An exact key for a token Python's `Decimal()` accepts (sign, digits with `_`, point, exponent, inf):
 * equal keys ⇔ equal Decimals, so `1.0` and `1.00` agree, `0.1` and `0.10000001` do not. 'NaN' never
 * equals anything; null when the token is not a decimal.
 */
function decimalKey(token: string): string | null {
  const m = /^([+-]?)(?:(\d+(?:_\d+)*)(?:\.(\d+(?:_\d+)*)?)?|\.(\d+(?:_\d+)*))(?:e([+-]?\d+(?:_\d+)*))?$/i.exec(token);
  if (!m) {
    if (/^[+-]?(?:inf|infinity)$/i.test(token)) return token.startsWith('-') ? '-inf' : '+inf';
    return /^[+-]?s?nan\d*$/i.test(token) ? 'NaN' : null;
  }
  const [, sign, int = '', frac1 = '', frac2 = '', exp = '0'] = m;
  const frac = (frac1 + frac2).replace(/_/g, '');
  let digits = (int.replace(/_/g, '') + frac).replace(/^0+/, '');
  if (digits === '') return '0'; // -0 == 0
  let e = BigInt(exp.replace(/_/g, '')) - BigInt(frac.length);
  const trimmed = digits.replace(/0+$/, '');
  e += BigInt(digits.length - trimmed.length);
  digits = trimmed;
  return `${sign === '-' ? '-' : '+'}${digits}e${e}`;
}

function decimalLine(line: string): string[] | null {
  const keys = line.split(/\s+/).filter(Boolean).map(decimalKey);
  return keys.some((k) => k === null) ? null : (keys as string[]);
}

/**
 * LiveCodeBench's stdin check: both texts stripped and split into lines, each stripped; same line
 * count; lines equal as text or, failing that, as lists of Decimals.
 */
export function lcbOutputsMatch(stdout: string, expected: string): boolean {
  const lines = (s: string) => s.trim().split('\n').map((l) => l.trim());
  const got = lines(stdout);
  const want = lines(expected);
  if (got.length !== want.length) return false;
  return got.every((g, i) => {
    const w = want[i]!;
    if (g === w) return true;
    const a = decimalLine(g);
    const b = decimalLine(w);
    return a !== null && b !== null && a.length === b.length && a.every((k, j) => k !== 'NaN' && k === b[j]);
  });
}

/**
 * LiveCodeBench: each test in its own process (default 6 s), prelude + answer; stdin tests compare the
 * output with `lcbOutputsMatch`, functional tests need `fnName`. Stops at the first failing test;
 * passed ⇔ all tests pass (an empty test list does not pass).
 */
export async function scoreLcb(
  code: string,
  tests: LcbTest[],
  opts: CodeRunOptions & { fnName?: string; timeoutMs?: number } = {},
): Promise<LcbResult> {
  const totalTests = tests.length;
  if (totalTests === 0) return { passed: false, passedTests: 0, totalTests, detail: 'no tests' };
  const timeoutMs = opts.timeoutMs ?? 6000;
  const base = `${MBPP_IMPORT_PRELUDE}\n${code}\n`;
  const run: CodeRunOptions = { python: opts.python, signal: opts.signal, sandbox: opts.sandbox };
  for (let i = 0; i < totalTests; i++) {
    const t = tests[i]!;
    const fail = (why: string): LcbResult => ({ passed: false, passedTests: i, totalTests, detail: `test ${i + 1}/${totalTests}: ${why}` });
    if (t.testtype === 'functional') {
      if (!opts.fnName) throw new InvalidArgument('a functional LiveCodeBench test needs fnName (metadata.func_name of the problem)');
      const spec = { kind: 'lcb', input: t.input, output: t.output, fn_name: opts.fnName };
      const r = await runVerdict(code, spec, { ...run, timeoutMs });
      if (r.timedOut) return fail('timeout');
      if (r.exitCode === 0 && r.verdict === 'pass') continue;
      return fail(r.verdict.startsWith('fail ') ? `wrong answer, got ${r.verdict.slice(5)}` : tail(r.stderr) || `exit code ${r.exitCode}`);
    }
    const r = await runPythonProgram(base, { ...run, stdin: t.input, timeoutMs });
    if (r.timedOut) return fail('timeout');
    if (r.exitCode !== 0) return fail(tail(r.stderr) || `exit code ${r.exitCode}`);
    if (!lcbOutputsMatch(r.stdout, t.output)) return fail('wrong answer');
  }
  return { passed: true, passedTests: totalTests, totalTests, detail: '' };
}

/** LiveCodeBench's `public_test_cases` (a JSON list of {input, output, testtype}), checked. */
export function parseLcbTests(json: string): LcbTest[] {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch (e) {
    throw new InvalidArgument(`LiveCodeBench test cases are not valid JSON (${(e as Error).message}); re-download the dataset`);
  }
  if (!Array.isArray(v)) throw new InvalidArgument('LiveCodeBench test cases should be a JSON list; re-download the dataset');
  return v.map((t: unknown, i) => {
    const o = t as Partial<LcbTest> | null;
    if (!o || typeof o.input !== 'string' || typeof o.output !== 'string' || (o.testtype !== 'stdin' && o.testtype !== 'functional')) {
      throw new InvalidArgument(
        `LiveCodeBench test ${i} lacks a string input/output or a testtype of stdin/functional; re-download the dataset`,
      );
    }
    return { input: o.input, output: o.output, testtype: o.testtype };
  });
}

/** LiveCodeBench's `private_test_cases`: base64 → zlib → pickle of a JSON string → tests. */
export async function decodeLcbPrivateTests(encoded: string): Promise<LcbTest[]> {
  const zlib = await nodeImport('node:zlib');
  const packed = Buffer.from(encoded.trim(), 'base64');
  const pickled = await new Promise<Uint8Array>((resolve, reject) =>
    zlib.inflate(packed, (err, out) =>
      err
        ? reject(new InvalidArgument(`LiveCodeBench private tests are not zlib data (${err.message}); re-download the dataset`))
        : resolve(out),
    ),
  );
  return parseLcbTests(unpickleStr(pickled));
}

/**
 * The one Python object the private tests hold: a pickled `str` (any protocol 2–5). src/formats/torch.ts's
 * reader is private to state dicts, and a str needs only these opcodes; anything else is refused.
 */
export function unpickleStr(bytes: Uint8Array): string {
  const bad = (what: string) =>
    new InvalidArgument(`LiveCodeBench private tests: ${what}; expected a pickled str, re-download the dataset`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const utf8 = new TextDecoder();
  let pos = 0;
  let value: string | null = null;
  const need = (n: number) => {
    if (pos + n > bytes.length) throw bad(`truncated at byte ${pos}`);
    const at = pos;
    pos += n;
    return at;
  };
  const text = (n: number) => {
    const at = need(n);
    if (value !== null) throw bad('more than one object');
    value = utf8.decode(bytes.subarray(at, at + n));
  };
  for (;;) {
    const op = bytes[need(1)]!;
    switch (op) {
      case 0x80: need(1); break; // PROTO
      case 0x95: need(8); break; // FRAME: framing only, the data follows inline
      case 0x8c: text(bytes[need(1)]!); break; // SHORT_BINUNICODE
      case 0x58: text(dv.getUint32(need(4), true)); break; // BINUNICODE
      case 0x8d: text(Number(dv.getBigUint64(need(8), true))); break; // BINUNICODE8
      case 0x94: break; // MEMOIZE
      case 0x71: need(1); break; // BINPUT
      case 0x2e: // STOP
        if (value === null) throw bad('no string before STOP');
        return value;
      default:
        throw bad(`opcode 0x${op.toString(16).padStart(2, '0')} at byte ${pos - 1}`);
    }
  }
}
