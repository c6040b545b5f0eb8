/**
 * Programs with the exact result text the Python tool gives for them, whichever runner runs them: the Node subprocess
 * (python-node.ts, checked by python-parity.test.ts) and Pyodide in its worker (test/python-tool.browser.test.ts), so
 * that both format results alike (python-format.ts). Only texts that no Python version changes are listed.
 */
import { PYTHON_PRELUDE } from './python-format';

/** The line number a line of the model's code has in a traceback: the prelude runs first, in the same source. */
const line = (n: number) => PYTHON_PRELUDE.split('\n').length - 1 + n;

export const PYTHON_CASES: readonly { name: string; code: string; text: string }[] = [
  { name: 'stdout', code: 'print(sum(range(10)))', text: '45' },
  { name: 'the prelude', code: 'print(math.comb(10, 3), fractions.Fraction(6, 8), statistics.mean([1, 2, 6]))',
    text: '120 3/4 3' },
  { name: 'stderr and exit code', code: 'import sys\nprint("partial")\nsys.stderr.write("warn\\n")\nsys.exit(3)',
    text: 'partial\n[stderr]\nwarn\n[exit_code] 3' },
  { name: 'SystemExit with a message', code: 'raise SystemExit("bye")', text: '[stderr]\nbye\n[exit_code] 1' },
  { name: 'no output', code: 'x = 1', text: '[no output]' },
  { name: 'a traceback', code: 'print("a")\nraise ValueError("bad")',
    text: `a\n[stderr]\nTraceback (most recent call last):\n  File "<stdin>", line ${line(2)}, in <module>\n` +
      'ValueError: bad\n[exit_code] 1' },
  { name: 'unicode', code: 'print("π ≈", round(math.pi, 4), end="")', text: 'π ≈ 3.1416' },
];
