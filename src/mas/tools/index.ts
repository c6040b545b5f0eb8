// mas/tools/: the deliberation tool-caller's tools (docs/method.md §7.6): tag parsing, the decode/tool loop, and the
// Python (Node subprocess or Pyodide worker) and Tavily search runners.
export * from './parse';
export * from './loop';
export * from './python-format';
export * from './python-node';
export * from './tavily';
export * from './pyodide';
export * from './sandbox';
