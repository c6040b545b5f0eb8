/**
 * The page's settings as a URL query, so that a link reproduces a setup and back/forward move through
 * earlier ones. Only values that differ from the defaults are written.
 */
import { DEFAULT_ROUNDS, defaultLatentSteps, STYLES, type StyleName } from '../mas/styles';
import { registryStyle, TINY } from './offline';

export type Tab = 'ask' | 'train' | 'checkpoints' | 'env';
export type AskMode = 'latent' | 'text' | 'both';

export interface Settings {
  tab: Tab;
  /** A registry style name or 'tiny' (the offline system, offline.ts). */
  style: string;
  rounds: number;
  latentSteps: number;
  temperature: number;
  topP: number;
  seed: number;
  greedy: boolean;
  mode: AskMode;
}

/** The sampling the settings ask for, as the worker takes it. */
export function samplingOf(
  s: Pick<Settings, 'greedy' | 'temperature' | 'topP' | 'seed'>,
): { greedy: true } | { temperature: number; topP: number; seed: number } {
  return s.greedy ? { greedy: true } : { temperature: s.temperature, topP: s.topP, seed: s.seed };
}

export const TABS: readonly Tab[] = ['ask', 'train', 'checkpoints', 'env'];

/** The latent steps a style runs with until the user picks others ('tiny': the offline system's style's). */
export function styleLatentSteps(style: string): number {
  return defaultLatentSteps(STYLES[registryStyle(style) as StyleName] ?? {});
}

/** Upstream's demo (serve.py) samples at temperature 0.6, top-p 0.95; greedy is a choice here. */
export const DEFAULTS: Readonly<Settings> = {
  tab: 'ask',
  style: TINY,
  rounds: DEFAULT_ROUNDS,
  latentSteps: styleLatentSteps(TINY),
  temperature: 0.6,
  topP: 0.95,
  seed: 42,
  greedy: false,
  mode: 'latent',
};

export interface Range {
  min: number;
  max: number;
  step: number;
}
/** Upstream's demo sliders (serve.py): rounds 1–5, latent steps 8–64 in steps of 8. */
export const UPSTREAM_RANGE = { rounds: { min: 1, max: 5, step: 1 }, latentSteps: { min: 8, max: 64, step: 8 } } as const satisfies Record<
  string,
  Range
>;
/** What the page takes past them (Ask's "beyond upstream's ranges", and the URL). */
export const WIDE_RANGE = { rounds: { min: 1, max: 10, step: 1 }, latentSteps: { min: 0, max: 256, step: 1 } } as const satisfies Record<
  string,
  Range
>;

const inRange = (v: number, r: Range): boolean => Number.isInteger(v) && v >= r.min && v <= r.max && (v - r.min) % r.step === 0;

/** `v` moved into `r`: the nearest step inside it; `fallback` when `v` is not a number (an emptied field). */
export function fitRange(v: number | null | undefined, r: Range, fallback: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) return fallback;
  return Math.min(r.max, Math.max(r.min, r.min + Math.round((v - r.min) / r.step) * r.step));
}

const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);

/**
 * The ranges Ask offers `style` within upstream's: upstream's demo sliders, the latent steps reaching down to the
 * style's own default when that lies below them (the offline system's 4: 4–64 by 4, every slider value kept).
 */
export function upstreamRanges(style: string): { rounds: Range; latentSteps: Range } {
  const d = styleLatentSteps(style);
  const r = UPSTREAM_RANGE.latentSteps;
  if (!Number.isInteger(d) || d < 1 || d >= r.min) return UPSTREAM_RANGE;
  return { rounds: UPSTREAM_RANGE.rounds, latentSteps: { min: d, max: r.max, step: gcd(r.step, d) } };
}

/** The settings' rounds and latent steps lie in the ranges upstreamRanges offers their style (default: a released one's). */
export function withinUpstream(s: Pick<Settings, 'rounds' | 'latentSteps'> & { style?: string }): boolean {
  const r = upstreamRanges(s.style ?? '');
  return inRange(s.rounds, r.rounds) && inRange(s.latentSteps, r.latentSteps);
}

const num = (v: string | null, lo: number, hi: number, fallback: number, int = false): number => {
  if (v === null || v.trim() === '') return fallback;
  const x = Number(v);
  if (!Number.isFinite(x) || x < lo || x > hi) return fallback;
  return int ? Math.round(x) : x;
};

/** Settings from a query string; values out of range fall back to the defaults. */
export function parseSettings(search: string): Settings {
  const q = new URLSearchParams(search);
  const tab = q.get('tab') as Tab | null;
  const mode = q.get('mode') as AskMode | null;
  const style = q.get('style') || DEFAULTS.style;
  return {
    tab: tab && TABS.includes(tab) ? tab : DEFAULTS.tab,
    style,
    rounds: num(q.get('rounds'), WIDE_RANGE.rounds.min, WIDE_RANGE.rounds.max, DEFAULTS.rounds, true),
    latentSteps: num(q.get('latent'), WIDE_RANGE.latentSteps.min, WIDE_RANGE.latentSteps.max, styleLatentSteps(style), true),
    temperature: num(q.get('temp'), 0, 2, DEFAULTS.temperature),
    topP: num(q.get('top_p'), 0, 1, DEFAULTS.topP),
    seed: num(q.get('seed'), 0, 2 ** 31 - 1, DEFAULTS.seed, true),
    greedy: q.has('greedy') ? q.get('greedy') === '1' : DEFAULTS.greedy,
    mode: mode === 'latent' || mode === 'text' || mode === 'both' ? mode : DEFAULTS.mode,
  };
}

/** The query string ('' or '?…') of `s`, keeping unrelated parameters of `base` (e.g. groups). */
export function settingsQuery(s: Settings, base = ''): string {
  const q = new URLSearchParams(base);
  const put = (key: string, v: string, d: string) => (v === d ? q.delete(key) : q.set(key, v));
  put('tab', s.tab, DEFAULTS.tab);
  put('style', s.style, DEFAULTS.style);
  put('rounds', String(s.rounds), String(DEFAULTS.rounds));
  put('latent', String(s.latentSteps), String(styleLatentSteps(s.style)));
  put('temp', String(s.temperature), String(DEFAULTS.temperature));
  put('top_p', String(s.topP), String(DEFAULTS.topP));
  put('seed', String(s.seed), String(DEFAULTS.seed));
  put('greedy', s.greedy ? '1' : '0', DEFAULTS.greedy ? '1' : '0');
  put('mode', s.mode, DEFAULTS.mode);
  const text = q.toString();
  return text ? `?${text}` : '';
}
