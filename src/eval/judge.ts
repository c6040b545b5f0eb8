/**
 * The LLM judge for open-ended answers (release 2's "EM / LLM-as-Judge" for search QA, docs/method.md §7.4): an
 * OpenAI-compatible chat-completions endpoint configured, as upstream's, by API_KEY, API_BASE_URL and API_MODEL.
 * It is asked whether a prediction means the same as a gold answer and must reply with one word, CORRECT or
 * INCORRECT; any other reply is kept as it came with verdict null, and the caller scores that answer by exact
 * match. Upstream's own prompt is unpublished: this one is ours.
 *
 * The key lives only in the closure of createJudge(): it is sent in the Authorization header and nowhere else,
 * and every message, log line and stored reply has it replaced by "***", as has a user name and password written into
 * API_BASE_URL (https://user:password@host/v1; fetch refuses to send them, so they are left out of the request). A reply
 * is read up to maxReplyBytes and no further; only what retrying can fix (408, 429, 5xx, no answer) is retried.
 */
import { Cancelled, InvalidArgument, JudgeUnavailable } from '../errors';

export { JudgeUnavailable } from '../errors';
import { stripThink } from '../mas/answer';


/** The variables that configure the judge, and what each is for. */
export const JUDGE_ENV = {
  API_KEY: 'the API key of the judge endpoint, sent as "Authorization: Bearer …"',
  API_BASE_URL: 'the endpoint\'s base URL, up to but not including /chat/completions (e.g. https://api.openai.com/v1)',
  API_MODEL: 'the model that judges (e.g. gpt-4o-mini)',
} as const;

export interface JudgeOptions {
  /** Override API_KEY. */
  apiKey?: string;
  /** Override API_BASE_URL. */
  baseUrl?: string;
  /** Override API_MODEL. */
  model?: string;
  /** Where API_KEY, API_BASE_URL and API_MODEL are read for the fields not given above (the runner passes process.env). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Time limit of one request. Default 60 s. */
  timeoutMs?: number;
  /** Requests per verdict, first one included, when the endpoint answers 408, 429, 5xx, times out or cannot be reached. Default 4. */
  attempts?: number;
  /** Wait before the first retry; it doubles with each retry. A Retry-After header takes its place. Default 1 s. */
  backoffMs?: number;
  /** No wait (backoff or Retry-After) is longer than this. Default 120 s. */
  maxDelayMs?: number;
  /** The most bytes of a reply that are read; a longer one is JudgeUnavailable, not retried. Default 1 MiB. */
  maxReplyBytes?: number;
  /** Retries and malformed replies are reported here (the key already masked). Default console.warn. */
  log?: (line: string) => void;
  fetch?: typeof fetch;
  /** How a retry waits; tests replace it. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface JudgeRequest {
  question: string;
  /** Every accepted answer. */
  gold: readonly string[];
  prediction: string;
}

export type JudgeVerdict = 'CORRECT' | 'INCORRECT';

export interface JudgeReply {
  /** null when the reply was not exactly one of the two words. */
  verdict: JudgeVerdict | null;
  /** The reply as it came (the key masked, should it ever appear). */
  reply: string;
}

export interface Judge {
  readonly model: string;
  readonly baseUrl: string;
  judge(req: JudgeRequest, signal?: AbortSignal): Promise<JudgeReply>;
}

const SYSTEM = 'You grade answers to questions. You reply with exactly one word: CORRECT or INCORRECT.';

/** The user message: the question, the gold answer(s), the prediction, and the one-word instruction. */
export function judgePrompt(req: JudgeRequest): string {
  const gold =
    req.gold.length === 1
      ? `Gold answer: ${req.gold[0]}`
      : `Gold answers (any one of them is right):\n${req.gold.map((g) => `- ${g}`).join('\n')}`;
  return 'Decide whether the prediction below gives the same answer to the question as the gold answer. ' +
    'Wording, capitalisation, articles, abbreviations and extra detail do not matter as long as it names the same ' +
    'entity, number, date or fact. A prediction that names a different answer, hedges between several, or gives none is wrong.\n\n' +
    `Question: ${req.question}\n${gold}\nPrediction: ${req.prediction}\n\n` +
    'Reply with one word: CORRECT if the prediction is right, INCORRECT if it is not.';
}

/** The verdict of a reply that is one word, CORRECT or INCORRECT (any case, wrapped at most in punctuation or markdown); null otherwise. */
export function parseVerdict(reply: string): JudgeVerdict | null {
  const m = /^[\s*_"'`.:!()[\]]*(correct|incorrect)[\s*_"'`.!()[\]]*$/i.exec(stripThink(reply));
  return m ? (m[1]!.toUpperCase() as JudgeVerdict) : null;
}

/** The variables the judge needs that are unset, each with what it is for; empty when it can run. */
export function missingJudgeSettings(opts: JudgeOptions): string[] {
  const env = opts.env ?? {};
  const given = {
    API_KEY: opts.apiKey ?? env.API_KEY,
    API_BASE_URL: opts.baseUrl ?? env.API_BASE_URL,
    API_MODEL: opts.model ?? env.API_MODEL,
  };
  return (Object.keys(JUDGE_ENV) as (keyof typeof JUDGE_ENV)[]).filter((k) => !given[k]?.trim()).map((k) => `${k} (${JUDGE_ENV[k]})`);
}

const defaultSleep = (ms: number, signal?: AbortSignal) => new Promise<void>((res, rej) => {
  const t = setTimeout(res, ms);
  signal?.addEventListener('abort', () => { clearTimeout(t); rej(signal.reason); }, { once: true });
});

/** Retry-After as milliseconds (delta-seconds, fractions accepted, or an HTTP date); null when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  if (header === null || header.trim() === '') return null;
  const s = Number(header);
  if (Number.isFinite(s)) return Math.max(0, s * 1000);
  const t = Date.parse(header);
  return Number.isNaN(t) ? null : Math.max(0, t - now);
}

/** The body of `res` as text, read up to `cap` bytes; null (the rest cancelled, never read) when it is longer. */
async function readCapped(res: Response, cap: number): Promise<string | null> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > cap) {
      await reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) all.set(c, (at += c.byteLength) - c.byteLength);
  return new TextDecoder().decode(all);
}

/** `raw` (API_BASE_URL) without a user name and password, and those secrets as they may appear in text; unparsable: as is. */
function splitCredentials(raw: string): { url: string; shown: string; secrets: string[] } {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { url: raw, shown: raw, secrets: [] };
  }
  if (!u.username && !u.password) return { url: raw, shown: raw, secrets: [] };
  const userinfo = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)@/i.exec(raw)?.[1] ?? '';
  let password = u.password;
  try {
    password = decodeURIComponent(u.password);
  } catch { /* kept as written */ }
  const secrets = [userinfo, u.password, password].filter((x) => x.length >= 3);
  u.username = '';
  u.password = '';
  const url = u.href.replace(/\/$/, raw.endsWith('/') ? '/' : '');
  return { url, shown: url.replace('//', '//***@'), secrets };
}

/** What a status that retrying cannot fix says to check. */
function refusedHint(status: number): string {
  if (status === 401 || status === 403) return 'check API_KEY';
  if (status === 404) return 'check API_BASE_URL (the part before /chat/completions) and API_MODEL';
  return 'check API_MODEL and that API_BASE_URL is an OpenAI-compatible endpoint';
}

/**
 * A judge from options and the environment. Throws InvalidArgument naming every unset variable, so that a run
 * can check before it asks its first question.
 */
export function createJudge(opts: JudgeOptions): Judge {
  const missing = missingJudgeSettings(opts);
  if (missing.length) {
    throw new InvalidArgument(`the LLM judge (used for bamboogle, hotpotqa and rows with "judge": true) needs ${missing.join(', ')}; ` +
      'set them in the environment, or score by exact match only');
  }
  const env = opts.env ?? {};
  const key = (opts.apiKey ?? env.API_KEY)!.trim();
  const given = splitCredentials((opts.baseUrl ?? env.API_BASE_URL)!.trim().replace(/\/+$/, ''));
  const baseUrl = given.url;
  const model = (opts.model ?? env.API_MODEL)!.trim();
  const url = `${baseUrl}/chat/completions`;
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const attempts = opts.attempts ?? 4;
  const backoffMs = opts.backoffMs ?? 1000;
  const maxDelayMs = opts.maxDelayMs ?? 120_000;
  if (!Number.isInteger(attempts) || attempts < 1) throw new InvalidArgument(`judge attempts must be a positive integer, got ${attempts}`);
  if (!(timeoutMs > 0)) throw new InvalidArgument(`judge timeoutMs must be positive, got ${timeoutMs}`);
  const doFetch = opts.fetch ?? globalThis.fetch;
  const sleep = opts.sleep ?? defaultSleep;
  const maxReplyBytes = opts.maxReplyBytes ?? 2 ** 20;
  // the longest secret first, so that one inside another is masked whole
  const secrets = [key, ...given.secrets].filter((x) => x.length > 0).sort((a, b) => b.length - a.length);
  const mask = (s: string) => secrets.reduce((t, x) => t.split(x).join('***'), s);
  const log = (line: string) => (opts.log ?? console.warn)(mask(line));
  const where = mask(`${given.shown}/chat/completions`);

  async function once(body: string, signal?: AbortSignal): Promise<{ retry: boolean; why: string; waitMs?: number } | { reply: string }> {
    const timeout = AbortSignal.timeout(timeoutMs);
    let res: Response;
    let text: string | null;
    try {
      res = await doFetch(url, {
        method: 'POST', body, signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
      });
      // a status that is retried needs no body
      text = res.status === 408 || res.status === 429 || res.status >= 500 ? '' : await readCapped(res, maxReplyBytes);
    } catch (e) {
      if (signal?.aborted) throw new Cancelled('cancelled while waiting for the LLM judge');
      if (timeout.aborted) return { retry: true, why: `no answer within ${timeoutMs / 1000} s` };
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      return { retry: true, why: mask(`cannot reach it (${cause?.code ?? cause?.message ?? (e as Error).message})`) };
    }
    if (res.status === 408 || res.status === 429 || res.status >= 500) {
      await res.body?.cancel().catch(() => {});
      const wait = retryAfterMs(res.headers.get('retry-after'));
      return {
        retry: true,
        why: `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`,
        ...(wait !== null ? { waitMs: wait } : {}),
      };
    }
    if (text === null) {
      throw new JudgeUnavailable(`the LLM judge at ${where} answered HTTP ${res.status} with more than ${maxReplyBytes} bytes, where a ` +
        'chat completion of one word is a few hundred; it was cut there. Check that API_BASE_URL is an OpenAI-compatible endpoint');
    }
    const snippet = mask(text.replace(/\s+/g, ' ').trim().slice(0, 300));
    if (!res.ok) {
      throw new JudgeUnavailable(
        `the LLM judge at ${where} refused the request with HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}` +
          `${snippet ? ` (${snippet})` : ''}; ${refusedHint(res.status)}`,
      );
    }
    let content: unknown;
    try {
      content = (JSON.parse(text) as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message;
      if (content === undefined) throw new Error('no choices[0].message');
      content = (content as { content?: unknown }).content;
    } catch {
      throw new JudgeUnavailable(`the LLM judge at ${where} answered HTTP ${res.status} with something that is not a chat completion ` +
        `(${snippet || 'an empty body'}); check that API_BASE_URL is an OpenAI-compatible endpoint`);
    }
    return { reply: typeof content === 'string' ? content : content === null || content === undefined ? '' : JSON.stringify(content) };
  }

  return {
    model, baseUrl: mask(given.shown),
    async judge(req, signal) {
      const body = JSON.stringify({
        model,
        messages: [
          { role: 'system', content: SYSTEM },
          { role: 'user', content: judgePrompt(req) },
        ],
        temperature: 0,
      });
      let why = '';
      for (let a = 1; a <= attempts; a++) {
        if (signal?.aborted) throw new Cancelled('cancelled while waiting for the LLM judge');
        const r = await once(body, signal);
        if ('reply' in r) {
          const reply = mask(r.reply);
          const verdict = parseVerdict(reply);
          if (verdict === null)
            log(`judge: ${model} did not reply CORRECT or INCORRECT (${JSON.stringify(reply.slice(0, 120))}); scored by exact match`);
          return { verdict, reply };
        }
        why = r.why;
        if (a === attempts) break;
        const wait = Math.min(maxDelayMs, r.waitMs ?? backoffMs * 2 ** (a - 1));
        log(
          `judge: ${where}: ${why}; try ${a + 1} of ${attempts} in ${(wait / 1000).toFixed(wait < 1000 ? 2 : 1)} s${r.waitMs !== undefined ? ' (Retry-After)' : ''}`,
        );
        try {
          await sleep(wait, signal);
        } catch {
          throw new Cancelled('cancelled while waiting to retry the LLM judge');
        }
      }
      throw new JudgeUnavailable(`the LLM judge at ${where} failed ${attempts} time${attempts > 1 ? 's' : ''}, last: ${mask(why)}; ` +
        'check API_BASE_URL, that the service is up and that API_KEY has quota left, then run again');
    },
  };
}
