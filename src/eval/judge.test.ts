/**
 * The LLM judge against a local server that plays an OpenAI-compatible chat-completions endpoint: the request
 * it sends (path, bearer token, model, messages, temperature 0), right / wrong / malformed verdicts, 429 with
 * Retry-After then success, a server that never answers, 5xx until the attempts run out, refused requests; and
 * the key appears in no reply, log line or error message.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Cancelled, InvalidArgument } from '../errors';
import { createJudge, JudgeUnavailable, judgePrompt, missingJudgeSettings, parseVerdict, retryAfterMs, type JudgeOptions } from './judge';

const KEY = 'sk-test-SECRET-4f9a1c';
const MODEL = 'judge-model-1';

interface Seen { method: string; url: string; headers: IncomingMessage['headers']; body: unknown }
type Handler = (res: ServerResponse, n: number, seen: Seen) => void;

/** A server on 127.0.0.1 that records each request and answers the n-th (from 0) with `handler`. */
async function judgeServer(handler: Handler) {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const s = { method: req.method!, url: req.url!, headers: req.headers, body: raw ? JSON.parse(raw) : null };
      seen.push(s);
      handler(res, seen.length - 1, s);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  servers.push(server);
  return { seen, baseUrl: `http://127.0.0.1:${port}/v1`, port };
}
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

const completion = (content: unknown) =>
  JSON.stringify({
    id: 'c1',
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  });
const reply = (content: unknown): Handler => (res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(completion(content));

const REQ = {
  question: 'Who wrote the novel Frankenstein?',
  gold: ['Mary Shelley', 'Mary Wollstonecraft Shelley'],
  prediction: 'mary shelley',
};

/** A judge on `baseUrl` whose log lines and waits are recorded (waits take no time). */
function judgeOn(baseUrl: string, extra: Partial<JudgeOptions> = {}) {
  const logs: string[] = [];
  const waits: number[] = [];
  const judge = createJudge({
    env: { API_KEY: KEY, API_BASE_URL: baseUrl, API_MODEL: MODEL }, log: (l) => void logs.push(l),
    sleep: async (ms) => void waits.push(ms), timeoutMs: 2000, ...extra,
  });
  return { judge, logs, waits };
}

/** The rejection of `p`, which must happen. */
async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
}

describe('createJudge', () => {
  it('posts the question, gold answers and prediction to {API_BASE_URL}/chat/completions with the bearer key; ' +
    'CORRECT is right', async () => {
    const srv = await judgeServer(reply('CORRECT'));
    const { judge, logs } = judgeOn(`${srv.baseUrl}/`); // a trailing slash is dropped
    expect(await judge.judge(REQ)).toEqual({ verdict: 'CORRECT', reply: 'CORRECT' });
    expect(judge.model).toBe(MODEL);
    expect(srv.seen).toHaveLength(1);
    const [s] = srv.seen;
    expect(s!.method).toBe('POST');
    expect(s!.url).toBe('/v1/chat/completions');
    expect(s!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(s!.headers['content-type']).toBe('application/json');
    expect(s!.body).toEqual({
      model: MODEL,
      temperature: 0,
      messages: [
        { role: 'system', content: expect.stringMatching(/exactly one word: CORRECT or INCORRECT/) },
        { role: 'user', content: judgePrompt(REQ) },
      ],
    });
    const user = judgePrompt(REQ);
    expect(user).toContain('Question: Who wrote the novel Frankenstein?\n');
    expect(user).toContain('Gold answers (any one of them is right):\n- Mary Shelley\n- Mary Wollstonecraft Shelley\n');
    expect(user).toContain('Prediction: mary shelley\n');
    expect(user).toMatch(/Reply with one word: CORRECT .* INCORRECT/);
    expect(judgePrompt({ ...REQ, gold: ['Mary Shelley'] })).toContain('\nGold answer: Mary Shelley\n');
    expect(logs).toEqual([]);
  });

  it('INCORRECT is wrong; a reply that is not one of the two words is kept with verdict null and logged', async () => {
    const replies = ['INCORRECT', '**Incorrect.**', 'The prediction is correct', '', null, `CORRECT (key ${KEY})`];
    const srv = await judgeServer((res, n) => reply(replies[n])(res, n, srv.seen[n]!));
    const { judge, logs } = judgeOn(srv.baseUrl);
    expect(await judge.judge(REQ)).toEqual({ verdict: 'INCORRECT', reply: 'INCORRECT' });
    expect(await judge.judge(REQ)).toEqual({ verdict: 'INCORRECT', reply: '**Incorrect.**' });
    expect(await judge.judge(REQ)).toEqual({ verdict: null, reply: 'The prediction is correct' });
    expect(await judge.judge(REQ)).toEqual({ verdict: null, reply: '' });
    expect(await judge.judge(REQ)).toEqual({ verdict: null, reply: '' });
    // a reply that echoes the key is stored with it masked
    expect(await judge.judge(REQ)).toEqual({ verdict: null, reply: 'CORRECT (key ***)' });
    expect(logs).toHaveLength(4);
    expect(logs[0]).toBe(`judge: ${MODEL} did not reply CORRECT or INCORRECT ("The prediction is correct"); scored by exact match`);
    expect(logs.join('\n')).not.toContain(KEY);
  });

  it('waits as Retry-After says on 429, then takes the verdict', async () => {
    const srv = await judgeServer((res, n) => {
      if (n === 0) res.writeHead(429, 'Too Many Requests', { 'Retry-After': '2' }).end('{"error":{"message":"rate limited"}}');
      else reply('CORRECT')(res, n, srv.seen[n]!);
    });
    const { judge, logs, waits } = judgeOn(srv.baseUrl);
    expect(await judge.judge(REQ)).toEqual({ verdict: 'CORRECT', reply: 'CORRECT' });
    expect(srv.seen).toHaveLength(2);
    expect(srv.seen[1]!.body).toEqual(srv.seen[0]!.body);
    expect(waits).toEqual([2000]);
    expect(logs).toEqual([`judge: ${srv.baseUrl}/chat/completions: HTTP 429 Too Many Requests; try 2 of 4 in 2.0 s (Retry-After)`]);
  });

  it('really sleeps between tries (a short Retry-After, no test hook)', async () => {
    const srv = await judgeServer((res, n) => {
      if (n === 0) res.writeHead(429, { 'Retry-After': '0.03' }).end();
      else reply('INCORRECT')(res, n, srv.seen[n]!);
    });
    const t0 = performance.now();
    const judge = createJudge({ apiKey: KEY, baseUrl: srv.baseUrl, model: MODEL, log: () => {} });
    expect((await judge.judge(REQ)).verdict).toBe('INCORRECT');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
  });

  it('a server that never answers times out each try, then JudgeUnavailable says so', async () => {
    const srv = await judgeServer(() => {}); // holds every request open
    const { judge, logs, waits } = judgeOn(srv.baseUrl, { timeoutMs: 40, attempts: 3, backoffMs: 5 });
    const t0 = performance.now();
    const e = await rejection(judge.judge(REQ));
    expect(performance.now() - t0).toBeLessThan(1500);
    expect(e).toBeInstanceOf(JudgeUnavailable);
    expect(e.name).toBe('JudgeUnavailable');
    expect(e.message).toBe(`the LLM judge at ${srv.baseUrl}/chat/completions failed 3 times, last: no answer within 0.04 s; ` +
      'check API_BASE_URL, that the service is up and that API_KEY has quota left, then run again');
    await expect.poll(() => srv.seen.length).toBe(3);
    expect(waits).toEqual([5, 10]);
    expect(logs).toHaveLength(2);
  });

  it('5xx on every try: exponential backoff, then JudgeUnavailable', async () => {
    const srv = await judgeServer((res) => res.writeHead(503, 'Service Unavailable').end(`upstream down for ${KEY}`));
    const { judge, logs, waits } = judgeOn(srv.baseUrl, { backoffMs: 10, maxDelayMs: 35 });
    const e = await rejection(judge.judge(REQ));
    expect(e).toBeInstanceOf(JudgeUnavailable);
    expect(e.message).toMatch(/failed 4 times, last: HTTP 503 Service Unavailable; check API_BASE_URL/);
    expect(srv.seen).toHaveLength(4);
    expect(waits).toEqual([10, 20, 35]); // 40 capped by maxDelayMs
    expect(logs.map((l) => l.replace(/.*; /, ''))).toEqual(['try 2 of 4 in 0.01 s', 'try 3 of 4 in 0.02 s', 'try 4 of 4 in 0.04 s']);
    expect([e.message, String(e), e.stack, ...logs].join('\n')).not.toContain(KEY);
  });

  it('an endpoint nobody listens on: retries, then JudgeUnavailable names the connection error', async () => {
    const srv = await judgeServer(() => {});
    servers.splice(0).forEach((s) => s.close());
    const { judge, waits } = judgeOn(`http://127.0.0.1:${srv.port}/v1`, { attempts: 2 });
    const e = await rejection(judge.judge(REQ));
    expect(e).toBeInstanceOf(JudgeUnavailable);
    expect(e.message).toMatch(/failed 2 times, last: cannot reach it \(ECONNREFUSED\)/);
    expect(waits).toEqual([1000]);
  });

  it('a refused request (401, 404, 400) is not retried and says what to check; the key is masked in the echoed body', async () => {
    const answers: [number, string][] = [
      [401, `{"error":"Incorrect API key provided: ${KEY}"}`],
      [404, 'no such route'],
      [400, '{"error":"unknown model"}'],
    ];
    const srv = await judgeServer((res, n) => res.writeHead(answers[n]![0]).end(answers[n]![1]));
    const { judge, waits } = judgeOn(srv.baseUrl);
    const msgs: string[] = [];
    for (const hint of [
      'check API_KEY$',
      'check API_BASE_URL \\(the part before /chat/completions\\) and API_MODEL$',
      'check API_MODEL and',
    ]) {
      const e = await rejection(judge.judge(REQ));
      expect(e).toBeInstanceOf(JudgeUnavailable);
      expect(e.message).toMatch(new RegExp(hint));
      msgs.push(e.message, String(e.stack));
    }
    expect(msgs[0]).toBe(`the LLM judge at ${srv.baseUrl}/chat/completions refused the request with HTTP 401 Unauthorized ` +
      '({"error":"Incorrect API key provided: ***"}); check API_KEY');
    expect(srv.seen).toHaveLength(3);
    expect(waits).toEqual([]);
    expect(msgs.join('\n')).not.toContain(KEY);
  });

  it('a 200 that is not a chat completion is a configuration error, not a verdict', async () => {
    const srv = await judgeServer((res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end('<html>welcome</html>'));
    const e = await rejection(judgeOn(srv.baseUrl).judge.judge(REQ));
    expect(e).toBeInstanceOf(JudgeUnavailable);
    expect(e.message).toMatch(
      /answered HTTP 200 with something that is not a chat completion \(<html>welcome<\/html>\); check that API_BASE_URL/,
    );
  });

  it('stops with Cancelled when the caller aborts', async () => {
    const srv = await judgeServer(() => {});
    const ac = new AbortController();
    const p = judgeOn(srv.baseUrl).judge.judge(REQ, ac.signal);
    await expect.poll(() => srv.seen.length).toBe(1);
    ac.abort();
    expect(await rejection(p)).toBeInstanceOf(Cancelled);
  });

  it('names every unset variable and what it is for, before any request', () => {
    expect(missingJudgeSettings({ env: { API_KEY: KEY, API_BASE_URL: 'http://x/v1', API_MODEL: 'm' } })).toEqual([]);
    expect(missingJudgeSettings({ env: { API_KEY: KEY }, baseUrl: 'http://x/v1' })).toEqual([
      'API_MODEL (the model that judges (e.g. gpt-4o-mini))',
    ]);
    const e = (() => {
      try {
        createJudge({ env: { API_KEY: '  ' }, fetch: () => { throw new Error('no request may be sent'); } });
      } catch (err) {
        return err as Error;
      }
      throw new Error('expected a throw');
    })();
    expect(e).toBeInstanceOf(InvalidArgument);
    expect(e.message).toMatch(
      /^the LLM judge \(used for bamboogle, hotpotqa and rows with "judge": true\) needs API_KEY \(.*Bearer.*\), API_BASE_URL \(.*\/chat\/completions.*\), API_MODEL \(.*\); set them in the environment/,
    );
    expect(() => createJudge({ env: { API_KEY: KEY, API_BASE_URL: 'http://x', API_MODEL: 'm' }, attempts: 0 })).toThrow(InvalidArgument);
  });
});

describe('parseVerdict', () => {
  it('takes exactly one of the two words, in any case, wrapped at most in punctuation or markdown', () => {
    const cases: [string, string | null][] = [
      ['CORRECT', 'CORRECT'],
      ['INCORRECT', 'INCORRECT'],
      ['correct', 'CORRECT'],
      [' Incorrect.\n', 'INCORRECT'],
      ['**CORRECT**', 'CORRECT'],
      ['"INCORRECT"', 'INCORRECT'],
      ['<think>it is not right</think>\nINCORRECT', 'INCORRECT'],
      ['CORRECT.', 'CORRECT'],
      ['Correct!', 'CORRECT'],
      ['Verdict: CORRECT', null],
      ['CORRECT or INCORRECT', null],
      ['not correct', null],
      ['CORRECTLY', null],
      ['The answer is correct.', null],
      ['', null],
      ['INCORRECT\nbecause…', null],
      ['Yes', null],
    ];
    for (const [reply, verdict] of cases) expect([reply, parseVerdict(reply)]).toEqual([reply, verdict]);
  });
});

describe('retryAfterMs', () => {
  it('reads delta-seconds (fractions too) and HTTP dates', () => {
    expect(retryAfterMs('2')).toBe(2000);
    expect(retryAfterMs('0.05')).toBe(50);
    expect(retryAfterMs(null)).toBeNull();
    expect(retryAfterMs('soon')).toBeNull();
    const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
    expect(retryAfterMs('Wed, 21 Oct 2015 07:28:03 GMT', now)).toBe(3000);
    expect(retryAfterMs('Wed, 21 Oct 2015 07:27:00 GMT', now)).toBe(0);
  });
});

// issue 39 (11): a reply of any size was read whole (1 GiB → 2.2 GB RSS, reported as "cannot reach it"), an API_BASE_URL's
// password was printed in its retries, and 408 was refused while 4xx were not all permanent.
describe('createJudge: hostile or mistaken endpoints', () => {
  it('an endless reply is cut at the cap with JudgeUnavailable, not retried, in bounded memory', async () => {
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const srv = await judgeServer((res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const rss0 = process.memoryUsage().rss;
    const { judge, waits } = judgeOn(srv.baseUrl, { maxReplyBytes: 4 * 2 ** 20 });
    const e = await rejection(judge.judge(REQ));
    expect(e).toEqual(new JudgeUnavailable(`the LLM judge at ${srv.baseUrl}/chat/completions answered HTTP 200 with more than 4194304 ` +
      'bytes, where a chat completion of one word is a few hundred; it was cut there. Check that API_BASE_URL is an ' +
      'OpenAI-compatible endpoint'));
    expect(srv.seen).toHaveLength(1);
    expect(waits).toEqual([]);
    expect((process.memoryUsage().rss - rss0) / 2 ** 20).toBeLessThan(200);
  });

  it('a 401 to an API_BASE_URL with user:password@ is not retried, and the password is in no message or log line', async () => {
    const srv = await judgeServer((res) => res.writeHead(401).end('{"error":"bad credentials"}'));
    const withCreds = srv.baseUrl.replace('//', '//judge-user:pa%24%24-SECRET-77@');
    const { judge, logs, waits } = judgeOn(withCreds);
    expect(judge.baseUrl).toBe(`http://***@127.0.0.1:${srv.port}/v1`);
    const e = await rejection(judge.judge(REQ));
    expect(e).toEqual(new JudgeUnavailable(`the LLM judge at http://***@127.0.0.1:${srv.port}/v1/chat/completions refused the request ` +
      'with HTTP 401 Unauthorized ({"error":"bad credentials"}); check API_KEY'));
    expect(srv.seen).toHaveLength(1);
    expect(srv.seen[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(waits).toEqual([]);
    // and where nobody listens: every retry line and the last error are masked too
    const dead = createJudge({
      env: { API_KEY: KEY, API_BASE_URL: 'http://judge-user:pa$$-SECRET-77@127.0.0.1:9/v1', API_MODEL: MODEL },
      log: (l) => void logs.push(l), sleep: async () => {}, attempts: 2, timeoutMs: 2000,
    });
    const e2 = await rejection(dead.judge(REQ));
    expect(e2.message).toMatch(
      /^the LLM judge at http:\/\/\*\*\*@127\.0\.0\.1:9\/v1\/chat\/completions failed 2 times, last: cannot reach it/);
    expect(logs.length).toBe(1);
    for (const m of [e.message, String(e.stack), e2.message, ...logs]) expect(m).not.toMatch(/SECRET|judge-user|pa%24|pa\$\$/);
  });

  it('408 is retried like 429; 403 and 422 are not', async () => {
    const statuses = [408, 200, 403, 422];
    const srv = await judgeServer((res, n) =>
      statuses[n] === 200 ? reply('CORRECT')(res, n, srv.seen[n]!) : res.writeHead(statuses[n]!).end('{}'));
    const { judge, waits } = judgeOn(srv.baseUrl);
    expect((await judge.judge(REQ)).verdict).toBe('CORRECT');
    expect(waits).toEqual([1000]);
    expect((await rejection(judge.judge(REQ))).message).toMatch(/HTTP 403 Forbidden \(\{\}\); check API_KEY$/);
    expect((await rejection(judge.judge(REQ))).message).toMatch(/HTTP 422 Unprocessable Entity/);
    expect(srv.seen).toHaveLength(4);
  });
});
