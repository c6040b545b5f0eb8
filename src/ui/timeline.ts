/** The run timeline as data: 'stage' events folded into cells of rounds × agents, and the tool calls of deliberation. */
import type { EngineEvent, LatentMessage, LensView, ToolCallEvent } from '../../workers/protocol';
import type { HopReading } from '../eval/embedded-task';
import { topReading } from '../mas/lens';
import { STYLES, type StyleName } from '../mas/styles';
import { isOffline, offlineTask, registryStyle } from './offline';

export type StageEvent = Extract<EngineEvent, { type: 'stage' }>;

export interface Cell {
  /** 'cancelled' and 'failed': the stage was running when the ask was stopped or failed. */
  state: 'idle' | 'running' | 'done' | 'cancelled' | 'failed';
  decode: boolean;
  seconds?: number;
  latents?: number;
  /** Text mode: what the agent wrote. */
  text?: string;
}

/** How a run ended before its answer: stopped by the user (Stop), or failed; null while it runs or once it answered. */
export type RunEnd = 'cancelled' | 'failed' | null;

/** Agents of a style ('tiny': the offline system's) in stage order (round 0); for a style the registry does not know, `fallback`. */
export function stageRoles(style: string, fallback: readonly string[] = []): string[] {
  const spec = STYLES[registryStyle(style) as StyleName];
  if (!spec) return [...fallback];
  return [...new Set(spec.stages(0, 2).map((s) => s.role))];
}

/** Whether a style's final agent calls tools (deliberation's Python and search: the Ask view asks for a search key). */
export function styleUsesTools(style: string): boolean {
  return STYLES[registryStyle(style) as StyleName]?.tools ?? false;
}

/**
 * Cells keyed `${round}:${role}` (round 1-based) after the events in order; later events win. A run that `ended`
 * before its answer leaves no cell running: the stage that was running is marked cancelled or failed.
 */
export function foldStages(events: readonly StageEvent[], ended: RunEnd = null): Map<string, Cell> {
  const cells = new Map<string, Cell>();
  for (const e of events) {
    const key = `${e.round}:${e.role}`;
    if (e.state === 'running') cells.set(key, { state: ended ?? 'running', decode: e.decode });
    else cells.set(key, { state: 'done', decode: e.decode, seconds: e.seconds, latents: e.latents, text: e.text });
  }
  return cells;
}

/** The text a cell shows: '—', 'running…', 'cancelled', or e.g. '1.25 s · 8 latents' / '0.50 s · text'. */
export function cellText(c: Cell | undefined): string {
  if (!c || c.state === 'idle') return '—';
  if (c.state === 'running') return c.decode ? 'decoding…' : 'running…';
  if (c.state === 'cancelled') return 'cancelled';
  if (c.state === 'failed') return 'failed';
  const secs = c.seconds === undefined ? '' : `${c.seconds.toFixed(2)} s`;
  const what = c.decode ? 'text' : `${c.latents ?? 0} latent${c.latents === 1 ? '' : 's'}`;
  return secs ? `${secs} · ${what}` : what;
}

/** Text mode: what each agent of round `round` wrote, in `columns` order (null where it wrote nothing yet). */
export function roundTexts(cells: ReadonlyMap<string, Cell>, round: number, columns: readonly string[]): (string | null)[] {
  return columns.map((role) => cells.get(`${round}:${role}`)?.text ?? null);
}

/** Where a run keeps a message's lens (AskRun.lens): its stage and link. */
export const lensKey = (m: Pick<LatentMessage, 'stage' | 'link'>): string => `${m.stage}|${m.link}`;

/** Latent messages of the run in order, with the stage they came from. */
export function messagesOf(events: readonly StageEvent[]): { round: number; role: string; message: LatentMessage }[] {
  return events.flatMap((e) => (e.messages ?? []).map((message) => ({ round: e.round, role: e.role, message })));
}

/** The tool calls of a run in order, each as its latest event (a 'done' replaces its 'running'). */
export function foldTools(events: readonly ToolCallEvent[]): ToolCallEvent[] {
  const calls = new Map<number, ToolCallEvent>();
  for (const e of events) calls.set(e.index, e);
  return [...calls.values()].sort((a, b) => a.index - b.index);
}

/** A tool call's heading: e.g. 'python · running…' or 'search · 0.42 s'. */
export function toolText(e: ToolCallEvent): string {
  return `${e.tool} · ${e.state === 'running' ? 'running…' : `${e.seconds.toFixed(2)} s`}`;
}

/** A hand-off as the timeline shows it: who sent which message to whom in which round, and what its lens reads. */
export interface HandOff {
  round: number;
  from: string;
  to: string;
  link: string;
  /** The message's top reading (src/mas/lens.ts topReading), null until its lens is read. */
  token: string | null;
  prob: number | null;
  /** The hop that token supplies in a multi-hop task (tiny_recursion's), else null. */
  hop: HopReading | null;
}

/**
 * Whether an ask of `style` reads every hand-off's lens after its answer (else only the last message's): an offline
 * system whose task has hops, where the timeline shows which round supplied which (cheap at its size).
 */
export const readsEveryHandOff = (style: string): boolean => isOffline(style) && offlineTask(style).hopOf !== undefined;

/**
 * Each hand-off of a run with its lens's top reading, in order: for an offline system whose task has hops (issue 40),
 * the reading prefers a value of the task and names the hop it supplies ("round 2, learner → expert: cone, hop 2").
 */
export function handOffs(
  style: string, events: readonly StageEvent[], lens: Readonly<Record<string, { reading: LensView | null } | undefined>>,
): HandOff[] {
  const hopOf = isOffline(style) ? offlineTask(style).hopOf : undefined;
  return messagesOf(events).map(({ round, role, message }) => {
    const reading = lens[lensKey(message)]?.reading;
    const top = reading ? topReading(reading, hopOf ? (t) => hopOf(t) !== null : undefined) : null;
    return {
      round, from: role, to: message.to, link: message.link, token: top?.token ?? null, prob: top?.prob ?? null,
      hop: top && hopOf ? hopOf(top.token) : null,
    };
  });
}
