/** The Python tool's prelude and result text, shared by the Node runner and the Pyodide worker (docs/method.md §7.6). */

/**
 * Executed before the model's code: upstream's `import math, itertools, functools, fractions,
 * statistics` and `import sympy as sp` where sympy is installed. sympy is bound lazily (a real
 * module that loads on first use) because importing it costs about 1.5 s on every call.
 */
export const PYTHON_PRELUDE = `import math, itertools, functools, fractions, statistics
try:
    import sys as _sys, importlib.util as _ilu
    _spec = _ilu.find_spec("sympy")
    if _spec is not None:
        _spec.loader = _ilu.LazyLoader(_spec.loader)
        sp = _sys.modules["sympy"] = _ilu.module_from_spec(_spec)
        _spec.loader.exec_module(sp)
    del _sys, _ilu, _spec
except Exception:
    pass
`;

/** The result text of a finished run: stdout, then `[stderr]` and `[exit_code] N` sections where there are any. */
export function formatPythonOutput(stdout: string, stderr: string, exitCode: number): string {
  let out = stdout;
  const line = () => (out && !out.endsWith('\n') ? '\n' : '');
  if (stderr) out += `${line()}[stderr]\n${stderr}`;
  if (exitCode !== 0) out += `${line()}[exit_code] ${exitCode}`;
  out = out.trimEnd();
  return out || '[no output]';
}

export const timeoutText = (timeoutMs: number) =>
  `[timeout] Python tool exceeded ${(timeoutMs / 1000).toFixed(1)} seconds.`;

export const ABORTED_TEXT = '[aborted] The Python run was cancelled.';
