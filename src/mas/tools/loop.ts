/**
 * The deliberation tool loop (docs/method.md §7.6): the final tool-caller decodes until it closes a `<python>` or
 * `<search>` tag, the call runs, its result is spliced in, and the decode continues, all within one
 * total token budget.
 */
import { DEFAULT_RESULT_MAX_CHARS, findToolCall, formatResult, type ToolCall } from './parse';

export interface ToolRunners {
  python(code: string, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<string>;
  search(query: string, opts: { signal?: AbortSignal }): Promise<string>;
}

export type ToolEvent =
  | { kind: 'call'; tool: string; body: string }
  | { kind: 'result'; tool: string; result: string };

export interface ToolLoopOptions {
  /**
   * Continue the final agent's decode with `assistantSoFar` as the text it has written; generate at
   * most `budget` tokens, stop early when endsToolCall(text) (stoppedBy 'tool'). Returns only the NEW text.
   */
  generate(
    assistantSoFar: string,
    budget: number,
    signal?: AbortSignal,
  ): Promise<{ text: string; tokens: number; stoppedBy: 'eos' | 'length' | 'tool' | 'abort' }>;
  runners: ToolRunners;
  /** TOTAL budget over all continuations (generated tokens only; inserted results do not count). */
  maxNewTokens: number;
  /** Default 5. */
  maxToolCalls?: number;
  /** Default 6000. */
  resultMaxChars?: number;
  /** Default 10000. */
  pythonTimeoutMs?: number;
  signal?: AbortSignal;
  onEvent?: (e: ToolEvent) => void;
}

export interface ToolLoopResult {
  text: string;
  tokens: number;
  calls: { tool: 'python' | 'search'; body: string; result: string }[];
  stoppedBy: 'eos' | 'length' | 'abort' | 'tool-limit';
}

export const DEFAULT_MAX_TOOL_CALLS = 5;
export const DEFAULT_PYTHON_TIMEOUT_MS = 10_000;

/** Runs generate → tool → generate … until EOS, the budget, the call limit, or an abort. */
export async function toolLoop(opts: ToolLoopOptions): Promise<ToolLoopResult> {
  const maxCalls = opts.maxToolCalls ?? DEFAULT_MAX_TOOL_CALLS;
  const maxChars = opts.resultMaxChars ?? DEFAULT_RESULT_MAX_CHARS;
  const timeoutMs = opts.pythonTimeoutMs ?? DEFAULT_PYTHON_TIMEOUT_MS;
  const { signal } = opts;
  let text = '';
  let cursor = 0; // calls are searched for only after the last inserted result
  let tokens = 0;
  const calls: ToolLoopResult['calls'] = [];
  const done = (stoppedBy: ToolLoopResult['stoppedBy']): ToolLoopResult => ({ text, tokens, calls, stoppedBy });

  for (;;) {
    if (signal?.aborted) return done('abort');
    const remaining = opts.maxNewTokens - tokens;
    if (remaining <= 0) return done('length');
    const step = await opts.generate(text, remaining, signal);
    text += step.text;
    // tokens cut below with the text after a closing tag were still generated: they count
    tokens += step.tokens;
    if (step.stoppedBy === 'abort' || signal?.aborted) return done('abort');
    if (step.stoppedBy !== 'tool') return done(step.stoppedBy);

    const call = findToolCall(text, cursor);
    if (!call) {
      // a closing tag without its opener: upstream just keeps decoding; a step that made no
      // progress would loop forever, so it ends the decode instead
      if (step.tokens <= 0) return done('eos');
      continue;
    }
    text = text.slice(0, call.end);
    if (calls.length >= maxCalls) {
      text += ` <result> [tool limit reached after ${maxCalls} calls] </result>`;
      return done('tool-limit');
    }
    opts.onEvent?.({ kind: 'call', tool: call.tool, body: call.body });
    const result = await runCall(opts.runners, call, timeoutMs, signal);
    if (signal?.aborted) return done('abort');
    calls.push({ tool: call.tool, body: call.body, result });
    opts.onEvent?.({ kind: 'result', tool: call.tool, result });
    text += formatResult(result, maxChars);
    cursor = text.length;
  }
}

/** The result of a call whose runner threw (runners should not: they answer failures as text). */
export const toolFailureText = (tool: string, e: unknown) => `[error] ${tool} tool failed: ${e instanceof Error ? e.message : String(e)}`;

/** Runners should not throw for tool failures; one that does gets its message as the result. */
async function runCall(runners: ToolRunners, call: ToolCall, timeoutMs: number, signal?: AbortSignal): Promise<string> {
  try {
    return call.tool === 'python'
      ? await runners.python(call.body, { timeoutMs, signal })
      : await runners.search(call.body, { signal });
  } catch (e) {
    return toolFailureText(call.tool, e);
  }
}

/**
 * A tool call as it runs, for a view: 'running' once it is made, 'done' with the runner's text and the seconds it took.
 * `index` counts the calls of one tracedRunners from 0.
 */
export type ToolTrace = { index: number; tool: 'python' | 'search'; input: string } & (
  | { state: 'running' }
  | { state: 'done'; output: string; seconds: number }
);

/**
 * `runners` with each call announced through `emit` (running, then done); a runner that throws is answered as the tool
 * loop answers it (toolFailureText), and that text is the trace's output.
 */
export function tracedRunners(runners: ToolRunners, emit: (t: ToolTrace) => unknown): ToolRunners {
  let calls = 0;
  const traced = async (tool: ToolTrace['tool'], input: string, run: () => Promise<string>) => {
    const head = { index: calls++, tool, input };
    const t0 = performance.now();
    emit({ ...head, state: 'running' });
    let output: string;
    try {
      output = await run();
    } catch (e) {
      output = toolFailureText(tool, e);
    }
    emit({ ...head, state: 'done', output, seconds: (performance.now() - t0) / 1000 });
    return output;
  };
  return {
    python: (code, o) => traced('python', code, () => runners.python(code, o)),
    search: (query, o) => traced('search', query, () => runners.search(query, o)),
  };
}
