/**
 * The page's settings as a URL query, so that a link reproduces a setup and back/forward move through
 * earlier ones. Only values that differ from the defaults are written.
 */
import { defaultLatentSteps, STYLES, type StyleName } from '../mas/styles';

export type Tab = 'ask' | 'train' | 'checkpoints' | 'env';
export type AskMode = 'latent' | 'text' | 'both';

export interface Settings {
  tab: Tab;
  /** A registry style name or 'tiny' (the offline system). */
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
export function samplingOf(s: Pick<Settings, 'greedy' | 'temperature' | 'topP' | 'seed'>): { greedy: true } | { temperature: number; topP: number; seed: number } {
  return s.greedy ? { greedy: true } : { temperature: s.temperature, topP: s.topP, seed: s.seed };
}

export const TABS: readonly Tab[] = ['ask', 'train', 'checkpoints', 'env'];

/** The latent steps a style runs with until the user picks others ('tiny' is tiny_sequential). */
export function styleLatentSteps(style: string): number {
  return defaultLatentSteps(STYLES[(style === 'tiny' ? 'tiny_sequential' : style) as StyleName] ?? {});
}

export const DEFAULTS: Readonly<Settings> = {
  tab: 'ask', style: 'tiny', rounds: 3, latentSteps: styleLatentSteps('tiny'), temperature: 0.6, topP: 0.95, seed: 42, greedy: true, mode: 'latent',
};

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
    rounds: num(q.get('rounds'), 1, 10, DEFAULTS.rounds, true),
    latentSteps: num(q.get('latent'), 0, 256, styleLatentSteps(style), true),
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
