import { describe, expect, it } from 'vitest';
import { type ToolLoopOptions, type ToolRunners, toolLoop } from './loop';

type Step = Awaited<ReturnType<ToolLoopOptions['generate']>>;

/** A generate that replays `steps` and records what it was asked. */
function scripted(steps: Step[]) {
  const asked: { soFar: string; budget: number }[] = [];
  const generate: ToolLoopOptions['generate'] = async (soFar, budget) => {
    asked.push({ soFar, budget });
    const s = steps.shift();
    if (!s) throw new Error('generate called more often than scripted');
    return s;
  };
  return { generate, asked };
}

function fakeRunners() {
  const seen: string[] = [];
  const runners: ToolRunners = {
    python: async (code, { timeoutMs }) => (seen.push(`py:${code}:${timeoutMs}`), `out(${code})`),
    search: async (q) => (seen.push(`search:${q}`), `hits(${q})`),
  };
  return { runners, seen };
}

describe('toolLoop', () => {
  it('runs a call, cuts text after the closing tag, inserts the result and continues', async () => {
    const { generate, asked } = scripted([
      { text: 'Compute. <python>print(6*7)</python> junk after', tokens: 12, stoppedBy: 'tool' },
      { text: ' So \\boxed{42}.', tokens: 5, stoppedBy: 'eos' },
    ]);
    const { runners, seen } = fakeRunners();
    const events: string[] = [];
    const r = await toolLoop({ generate, runners, maxNewTokens: 100, onEvent: (e) => events.push(e.kind) });
    const first = 'Compute. <python>print(6*7)</python> <result> out(print(6*7)) </result>';
    expect(asked).toEqual([{ soFar: '', budget: 100 }, { soFar: first, budget: 88 }]);
    expect(r.text).toBe(`${first} So \\boxed{42}.`);
    expect(r.tokens).toBe(17);
    expect(r.stoppedBy).toBe('eos');
    expect(r.calls).toEqual([{ tool: 'python', body: 'print(6*7)', result: 'out(print(6*7))' }]);
    expect(seen).toEqual(['py:print(6*7):10000']);
    expect(events).toEqual(['call', 'result']);
  });

  it('continues past an unclosed tag and looks for calls only after the last result', async () => {
    const { generate, asked } = scripted([
      { text: '<search>a</search>', tokens: 4, stoppedBy: 'tool' },
      // a stray closing tag (no opener after the cursor): no call, just continue
      { text: ' and </search>', tokens: 3, stoppedBy: 'tool' },
      { text: ' <python>x=1', tokens: 3, stoppedBy: 'tool' },
      { text: '\nprint(x)</python>', tokens: 4, stoppedBy: 'tool' },
      { text: ' done', tokens: 1, stoppedBy: 'length' },
    ]);
    const { runners, seen } = fakeRunners();
    const r = await toolLoop({ generate, runners, maxNewTokens: 50, pythonTimeoutMs: 250 });
    expect(seen).toEqual(['search:a', 'py:x=1\nprint(x):250']);
    expect(asked.map((a) => a.budget)).toEqual([50, 46, 43, 40, 36]);
    expect(r.text).toBe(
      '<search>a</search> <result> hits(a) </result> and </search> <python>x=1\nprint(x)</python>' +
        ' <result> out(x=1\nprint(x)) </result> done',
    );
    expect(r.stoppedBy).toBe('length');
    expect(r.tokens).toBe(15);
  });

  it('stops with the limit message on the 6th call', async () => {
    const steps: Step[] = [];
    for (let i = 0; i < 6; i++) steps.push({ text: ` <python>print(${i})</python> extra`, tokens: 10, stoppedBy: 'tool' });
    const { generate } = scripted(steps);
    const { runners, seen } = fakeRunners();
    const r = await toolLoop({ generate, runners, maxNewTokens: 1000 });
    expect(seen).toHaveLength(5);
    expect(r.calls.map((c) => c.body)).toEqual(['print(0)', 'print(1)', 'print(2)', 'print(3)', 'print(4)']);
    expect(r.stoppedBy).toBe('tool-limit');
    expect(r.tokens).toBe(60);
    expect(r.text.endsWith(' <python>print(5)</python> <result> [tool limit reached after 5 calls] </result>')).toBe(true);
    expect(r.text.includes('extra')).toBe(false);
  });

  it('honours maxToolCalls and resultMaxChars', async () => {
    const { generate } = scripted([
      { text: '<python>p</python>', tokens: 2, stoppedBy: 'tool' },
      { text: '<python>q</python>', tokens: 2, stoppedBy: 'tool' },
    ]);
    const runners: ToolRunners = { python: async () => '123456789', search: async () => '' };
    const r = await toolLoop({ generate, runners, maxNewTokens: 100, maxToolCalls: 1, resultMaxChars: 3 });
    expect(r.text).toBe(
      '<python>p</python> <result> 123\n... [truncated 6 chars] </result>' +
        '<python>q</python> <result> [tool limit reached after 1 calls] </result>',
    );
    expect(r.stoppedBy).toBe('tool-limit');
  });

  it('stops with "length" when a tool result arrives with the budget spent', async () => {
    const { generate, asked } = scripted([{ text: '<search>q</search>', tokens: 8, stoppedBy: 'tool' }]);
    const { runners } = fakeRunners();
    const r = await toolLoop({ generate, runners, maxNewTokens: 8 });
    expect(asked).toHaveLength(1);
    expect(r).toMatchObject({ tokens: 8, stoppedBy: 'length', text: '<search>q</search> <result> hits(q) </result>' });
  });

  it('stops with "abort" when the signal fires during a tool run, without inserting its result', async () => {
    const ctl = new AbortController();
    const { generate, asked } = scripted([{ text: '<python>slow()</python>', tokens: 3, stoppedBy: 'tool' }]);
    let sawSignal: AbortSignal | undefined;
    const runners: ToolRunners = {
      python: async (_c, { signal }) => {
        sawSignal = signal;
        ctl.abort();
        return '[aborted]';
      },
      search: async () => '',
    };
    const r = await toolLoop({ generate, runners, maxNewTokens: 100, signal: ctl.signal });
    expect(sawSignal).toBe(ctl.signal);
    expect(asked).toHaveLength(1);
    expect(r).toEqual({ text: '<python>slow()</python>', tokens: 3, calls: [], stoppedBy: 'abort' });
  });

  it('stops with "abort" when generate reports it, and does not start when already aborted', async () => {
    const { generate } = scripted([{ text: 'part', tokens: 2, stoppedBy: 'abort' }]);
    const { runners } = fakeRunners();
    expect(await toolLoop({ generate, runners, maxNewTokens: 10 })).toMatchObject({ text: 'part', stoppedBy: 'abort' });
    const ctl = new AbortController();
    ctl.abort();
    const idle = scripted([]);
    expect(await toolLoop({ generate: idle.generate, runners, maxNewTokens: 10, signal: ctl.signal }))
      .toEqual({ text: '', tokens: 0, calls: [], stoppedBy: 'abort' });
    expect(idle.asked).toHaveLength(0);
  });

  it('turns a throwing runner into result text', async () => {
    const { generate } = scripted([
      { text: '<search>q</search>', tokens: 1, stoppedBy: 'tool' },
      { text: '.', tokens: 1, stoppedBy: 'eos' },
    ]);
    const runners: ToolRunners = { python: async () => '', search: async () => { throw new Error('boom'); } };
    const r = await toolLoop({ generate, runners, maxNewTokens: 10 });
    expect(r.text).toBe('<search>q</search> <result> [error] search tool failed: boom </result>.');
  });
});
