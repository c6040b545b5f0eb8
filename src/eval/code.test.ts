import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  decodeLcbPrivateTests, extractCode, lcbOutputsMatch, MBPP_IMPORT_PRELUDE, parseLcbTests, runPythonProgram,
  scoreLcb, scoreMbppPlus, unpickleStr, type LcbTest,
} from './code';

const hasPython = spawnSync('python3', ['--version']).status === 0;
if (!hasPython) console.warn('python3 not found: the code-scoring tests that run Python are skipped');

describe('extractCode', () => {
  it('takes the first python block after removing think blocks', () => {
    const text =
      '<think>```python\nprint("draft")\n```</think>Here:\n```python\ndef f(x):\n    return x + 1\n```\nand\n```python\nprint(2)\n```';
    expect(extractCode(text)).toBe('def f(x):\n    return x + 1\n');
  });

  it('prefers a python block to an earlier bare one, and takes a bare one when there is no python block', () => {
    expect(extractCode('```\nplain = 1\n```\n```python\nx = 2\n```')).toBe('x = 2\n');
    expect(extractCode('```json\n{"a": 1}\n```\ntext\n```\ny = 3\n```')).toBe('y = 3\n');
    expect(extractCode('```cpp\nint main() {}\n```')).toBeNull();
  });

  it('drops a leading "python" line, runs an unclosed block to the end, and says null without a block', () => {
    expect(extractCode('```\npython\nprint(1)\n```')).toBe('print(1)\n');
    expect(extractCode('Final Code:\n```python\nimport sys\nprint(sum(map(int, sys.stdin.read().split())))')).toBe(
      'import sys\nprint(sum(map(int, sys.stdin.read().split())))\n',
    );
    expect(extractCode('The answer is def f(): pass, no fences.')).toBeNull();
    expect(extractCode('```python\n\n```')).toBeNull();
  });
});

describe('lcbOutputsMatch', () => {
  it('compares stripped lines, ignoring surrounding blank lines and trailing spaces', () => {
    expect(lcbOutputsMatch('3\nabc  \n\n', '3\nabc')).toBe(true);
    expect(lcbOutputsMatch('3\r\nabc\r\n', '3\nabc\n')).toBe(true);
    expect(lcbOutputsMatch('3\nabd', '3\nabc')).toBe(false);
    expect(lcbOutputsMatch('3', '3\n4')).toBe(false);
  });

  it('falls back to exact decimals: Decimal("1.0") == Decimal("1.00") in Python, so 1.0 2 matches 1.00 2.0', () => {
    expect(lcbOutputsMatch('1.0 2', '1.00 2.0')).toBe(true);
    expect(lcbOutputsMatch('-0 1e2 .5 1_000', '0.0 100 0.50 1000')).toBe(true);
    expect(lcbOutputsMatch('0.1', '0.10000001')).toBe(false); // exact, not float-close
    expect(lcbOutputsMatch('1 2', '1 2 0')).toBe(false);
    expect(lcbOutputsMatch('nan', 'NaN')).toBe(false); // Decimal NaN never equals
    expect(lcbOutputsMatch('Yes 1', 'yes 1.0')).toBe(false); // a non-number token: text must match
  });
});

describe('LiveCodeBench test decoding', () => {
  const expected: LcbTest[] = [
    { input: '3\n1 2 3\n', output: '6\n', testtype: 'stdin' },
    { input: '[2, 7, 11, 15]\n9', output: '[0, 1]', testtype: 'functional' },
  ];

  it('decodes private tests pickled with the default protocol and with protocol 2', async () => {
    // python3 -c "import base64,zlib,pickle,json; print(base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode())"
    const p4 =
      'eJxrYJk6kQECenqjq5Uy8wpKS5SsFJSMY/IMFYwUgJSSjoJSfmkJVNwMIlCSWlxSUlmQChIqLknJzFOq1VFA0h5tpKNgrqNgaAjEprExeZaopkQbAMVj0Q1KK81LLsnMz0vMUaqNnaIHAD1SLOM=';
    // the same with pickle.dumps(json.dumps(tests), protocol=2)
    const p2 =
      'eJxrYIroZWBgiK5WyswrKC1RslJQMo7JM1QwUgBSSjoKSvmlJVBxM4hASWpxSUllQSpIqLgkJTNPqVZHAUl7tJGOgrmOgqEhEJvGxuRZopoSbQAUj0U3KK00L7kkMz8vMUepNraQQQ8AmNsrZA==';
    expect(await decodeLcbPrivateTests(p4)).toEqual(expected);
    expect(await decodeLcbPrivateTests(p2)).toEqual(expected);
  });

  it('decodes a long string (BINUNICODE outside any frame) with non-ASCII text', async () => {
    // tests = [{'input': 'x' * 70000, 'output': 'é', 'testtype': 'stdin'}], encoded as above
    const big =
      'eJztyLEJwkAUAFAFF3CD8GuRtGYSQe28Ik08yD9QRHAIh3BMyQ6W75XvvTl+t+vV6RnjVFvG0MUdAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAPi72HVxa1lbxtDFufV9OSyXZc581LLsnNdxitfls/8Bt8FHmw==';
    expect(await decodeLcbPrivateTests(big)).toEqual([{ input: 'x'.repeat(70000), output: 'é', testtype: 'stdin' }]);
  });

  it('refuses a pickle that is not a str, truncated data and non-zlib data with a named error', async () => {
    // base64.b64encode(zlib.compress(pickle.dumps([1, 2])))
    const list = 'eJxrYJnKyQABsVM0vBm9mVL1ACJhA2g=';
    // PROTO (2 bytes) and FRAME (9) come first, then EMPTY_LIST (0x5d)
    await expect(decodeLcbPrivateTests(list)).rejects.toThrow('opcode 0x5d at byte 11');
    await expect(decodeLcbPrivateTests(list)).rejects.toMatchObject({ name: 'InvalidArgument' });
    expect(() => unpickleStr(new Uint8Array([0x80, 0x04, 0x8c, 0x05, 0x61]))).toThrow('truncated at byte 4');
    await expect(decodeLcbPrivateTests('bm90IHpsaWI=')).rejects.toThrow('not zlib data');
  });

  it('parses public test cases and rejects malformed ones', () => {
    expect(parseLcbTests(JSON.stringify(expected))).toEqual(expected);
    expect(() => parseLcbTests('[{"input": "1", "output": "2", "testtype": "file"}]')).toThrow('testtype of stdin/functional');
    expect(() => parseLcbTests('{"input": "1"}')).toThrow('should be a JSON list');
  });
});

// shaped like an evalplus/mbppplus `test` field: inputs, results, an assertion helper, a loop
const MBPP_TEST = `
from math import isclose

def assertion(out, exp, atol):
    if atol == 0 and isinstance(exp, float):
        atol = 1e-6
    if out != exp and atol != 0:
        assert isclose(out, exp, abs_tol=atol)
    else:
        assert out == exp

inputs = [[(3, 4, 5, 6), (5, 7, 4, 10)], [(1, 2, 3, 4), (5, 4, 3, 7)], [(11, 12), (13, 14)]]
results = [(4, 5), (3, 4), ()]
for i, (inp, exp) in enumerate(zip(inputs, results)):
    assertion(similar_elements(*inp), exp, 0)
`;

describe.skipIf(!hasPython)('code scoring with python3', () => {
  it('runs a program with its own stdin in a fresh folder with a stripped environment', async () => {
    const src = 'import os, sys\nprint(sys.stdin.read().upper(), end="")\nprint(sorted(os.listdir(".")), "HOME" in os.environ)';
    const r = await runPythonProgram(src, { stdin: 'abc\n', timeoutMs: 10_000 });
    expect(r).toEqual({ exitCode: 0, stdout: "ABC\n['main.py'] False\n", stderr: '', timedOut: false });
  });

  it('MBPP+: the prelude makes Counter and List available; a correct solution passes, a wrong one fails', async () => {
    const good = 'def similar_elements(a: List[int], b):\n    return tuple(sorted(set(a) & set(b)))';
    const bad = 'def similar_elements(a, b):\n    return tuple(set(a) & set(b))[:1]';
    const [ok, wrong] = await Promise.all([scoreMbppPlus(good, MBPP_TEST), scoreMbppPlus(bad, MBPP_TEST)]);
    expect(ok).toEqual({ passed: true, exitCode: 0, timedOut: false, detail: '' });
    expect(wrong).toMatchObject({ passed: false, exitCode: 1, timedOut: false });
    expect(wrong.detail.endsWith('AssertionError')).toBe(true);
    expect(MBPP_IMPORT_PRELUDE).toContain('from typing import *\n');
    expect(MBPP_IMPORT_PRELUDE.endsWith('import typing\nsys.setrecursionlimit(50000)\n')).toBe(true);
  });

  it('MBPP+: an endless loop is killed at the limit and fails as a timeout', async () => {
    const t0 = Date.now();
    const r = await scoreMbppPlus('def similar_elements(a, b):\n    while True: pass', MBPP_TEST, { timeoutMs: 500 });
    expect(r).toEqual({ passed: false, exitCode: null, timedOut: true, detail: 'timeout' });
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('LiveCodeBench stdin: pass, wrong answer at the second test, decimal-tolerant pass, runtime error', async () => {
    const tests: LcbTest[] = [
      { input: '3\n1 2 3\n', output: '6\n', testtype: 'stdin' },
      { input: '2\n5 5\n', output: '10\n', testtype: 'stdin' },
    ];
    const sum = 'n = int(input())\nprint(sum(map(int, input().split())))';
    const off = 'n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) if n == 3 else 0)';
    const halves = 'print(1.0, 2)';
    const crash = 'raise ValueError("no")';
    const [a, b, c, d] = await Promise.all([
      scoreLcb(sum, tests),
      scoreLcb(off, tests),
      scoreLcb(halves, [{ input: '', output: '1.00 2.0', testtype: 'stdin' }]),
      scoreLcb(crash, tests),
    ]);
    expect(a).toEqual({ passed: true, passedTests: 2, totalTests: 2, detail: '' });
    expect(b).toEqual({ passed: false, passedTests: 1, totalTests: 2, detail: 'test 2/2: wrong answer' });
    expect(c).toEqual({ passed: true, passedTests: 1, totalTests: 1, detail: '' });
    expect(d).toMatchObject({ passed: false, passedTests: 0, totalTests: 2 });
    expect(d.detail.endsWith('ValueError: no')).toBe(true);
  });

  it('LiveCodeBench functional: Solution method and top-level function, pass, wrong answer, fake verdicts', async () => {
    const tests: LcbTest[] = [
      { input: '[2, 7, 11, 15]\n9', output: '[0, 1]', testtype: 'functional' },
      { input: '[3, 2, 4]\n6', output: '[1, 2]', testtype: 'functional' },
    ];
    const solution = [
      'class Solution:',
      '    def twoSum(self, nums: List[int], target: int) -> List[int]:',
      '        seen = {}',
      '        for i, x in enumerate(nums):',
      '            if target - x in seen:',
      '                return (seen[target - x], i)', // a tuple counts as a list, as in LiveCodeBench
      '            seen[x] = i',
    ].join('\n');
    const topLevel = 'def twoSum(nums, target):\n    print("pass")\n    return [0, 1]';
    const early = 'import sys\nprint("pass")\nsys.exit(0)';
    const [a, b, c] = await Promise.all([
      scoreLcb(solution, tests, { fnName: 'twoSum' }),
      scoreLcb(topLevel, tests, { fnName: 'twoSum' }),
      scoreLcb(early, tests, { fnName: 'twoSum' }),
    ]);
    expect(a).toEqual({ passed: true, passedTests: 2, totalTests: 2, detail: '' });
    expect(b).toEqual({ passed: false, passedTests: 1, totalTests: 2, detail: 'test 2/2: wrong answer, got [0, 1]' });
    expect(c).toMatchObject({ passed: false, passedTests: 0, totalTests: 2 });
    expect(c.detail).toMatch(/^test 1\/2: [^]*Traceback \(most recent call last\):\n[^]*\n    sys\.exit\(0\)\nSystemExit: 0/);
    await expect(scoreLcb(solution, tests)).rejects.toThrow('needs fnName');
  });

  it('LiveCodeBench functional: a verdict cannot be forged (issue 39)', async () => {
    const tests: LcbTest[] = [{ input: '[2, 7, 11, 15]\n9', output: '[0, 1]', testtype: 'functional' }];
    // today's harness wrote the nonce and the expected output to lcb_case.json, next to the answer
    const reader = [
      'import json, os',
      'def twoSum(nums, target):',
      '    for name in os.listdir("."):',
      '        try:',
      '            case = json.load(open(name))',
      '            print("\\n" + case["nonce"] + " pass", flush=True)',
      '            os._exit(0)',
      '        except Exception:',
      '            pass',
      '    return [9, 9]',
    ].join('\n');
    const alwaysEqual = 'class Any(list):\n    def __eq__(self, other): return True\ndef twoSum(nums, target):\n    return Any([5])';
    const writer = [
      'import os',
      'def twoSum(nums, target):',
      '    for fd in range(3, 64):',
      '        try: os.write(fd, b"\\nrmas-verdict pass\\n")',
      '        except OSError: pass',
      '    try: open("/proc/%d/fd/1" % os.getppid(), "w").write("pass\\n")',
      '    except OSError as e: print(type(e).__name__)',
      '    return [7]',
    ].join('\n');
    const [a, b, c] = await Promise.all([
      scoreLcb(reader, tests, { fnName: 'twoSum' }),
      scoreLcb(alwaysEqual, tests, { fnName: 'twoSum' }),
      scoreLcb(writer, tests, { fnName: 'twoSum', timeoutMs: 2000 }),
    ]);
    expect(a).toEqual({ passed: false, passedTests: 0, totalTests: 1, detail: 'test 1/1: wrong answer, got [9, 9]' });
    expect(b).toEqual({ passed: false, passedTests: 0, totalTests: 1, detail: 'test 1/1: wrong answer, got [5]' });
    // its bytes in the harness's reply pipe leave the harness waiting for the rest: a failure, never a pass
    expect(c).toEqual({ passed: false, passedTests: 0, totalTests: 1, detail: 'test 1/1: timeout' });
  });

  it('MBPP+: an exit code 0 from atexit, an always-equal result or a look for the tests does not pass (issue 39)', async () => {
    const atexit = 'import atexit, os\natexit.register(lambda: os._exit(0))\ndef similar_elements(a, b):\n    return (0,)';
    const alwaysEqual = 'class Any(tuple):\n    def __eq__(self, other): return True\ndef similar_elements(a, b):\n    return Any()';
    const looker = [
      'import gc, os, sys',
      'seen = [n for n in os.listdir(".")] + [a for a in sys.argv]',
      'def similar_elements(a, b):',
      '    src = " ".join(open(n).read() for n in seen if os.path.isfile(n))',
      '    return (4, 5) if "results" in src else ()',
    ].join('\n');
    const good = 'def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))';
    const [x, y, z, ok] = await Promise.all([
      scoreMbppPlus(atexit, MBPP_TEST), scoreMbppPlus(alwaysEqual, MBPP_TEST), scoreMbppPlus(looker, MBPP_TEST),
      scoreMbppPlus(good, MBPP_TEST),
    ]);
    for (const r of [x, y, z]) {
      expect(r).toMatchObject({ passed: false, exitCode: 1, timedOut: false });
      expect(r.detail.endsWith('AssertionError')).toBe(true);
    }
    expect(ok).toEqual({ passed: true, exitCode: 0, timedOut: false, detail: '' });
  });

  it('MBPP+: results reach the harness as the values they are: iterators, ranges, named tuples, big ints, dicts, bytes', async () => {
    const test = [
      'assert list(evens(5)) == [0, 2, 4] and set(evens(3)) == {0, 2}',
      'assert evens(4) != [0, 2] and span(3) == range(3) and span(3) != [0, 1, 2]',
      'assert pair() == (1, 2) and pair().__class__ is tuple and big() == 2 ** 100 + 1 and big() != 2.0 ** 100',
      'assert halves() == {"a": 0.5, (1, 2): float("inf")} and blob() == b"\\x00x" and cplx() == 1 - 2j',
    ].join('\n');
    const code = [
      'from collections import namedtuple',
      'P = namedtuple("P", "x y")',
      'def evens(n): return (i for i in range(n) if i % 2 == 0)',
      'def span(n): return range(n)',
      'def pair(): return P(1, 2)',
      'def big(): return 2 ** 100 + 1',
      'def halves(): return {"a": 0.5, (1, 2): float("inf")}',
      'def blob(): return bytearray(b"\\x00x")',
      'def cplx(): return complex(1, -2)',
    ].join('\n');
    expect(await scoreMbppPlus(code, test)).toEqual({ passed: true, exitCode: 0, timedOut: false, detail: '' });
  });

  it('throws Cancelled on abort', async () => {
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 200);
    await expect(runPythonProgram('import time\ntime.sleep(30)', { timeoutMs: 20_000, signal: ctl.signal })).rejects.toMatchObject({
      name: 'Cancelled',
    });
  });
});

describe('runPythonProgram without an interpreter', () => {
  it('throws a named error saying how to install Python', async () => {
    const run = runPythonProgram('print(1)', { timeoutMs: 1000, python: '/nonexistent/python3' });
    await expect(run).rejects.toMatchObject({ name: 'InvalidArgument' });
    await expect(runPythonProgram('print(1)', { timeoutMs: 1000, python: '/nonexistent/python3' })).rejects.toThrow('Install Python 3');
  });
});
