/**
 * Message ablations: a run of a system with every latent message its outer links send replaced, to measure
 * what the messages carry. `zeroed` sends zeros of the message's shape; `replaced` sends the messages that a
 * run on another question sent (recorded with AskOptions.recordMessages): the "shuffled" control, in which
 * each receiver reads a message about a different question in the same place and form; `removed` sends nothing on
 * the links it names, and each stage that reads only those gets its agent's first-round prompt, without slots (the
 * feedback removed: every hand-off is a first one). `rmas ask` and the tab
 * check and prepare an ablation here (checkAblation, prepareAblation), so that both run the donor alike.
 */
import { F, noGrad } from '../autograd';
import type { DType } from '../formats/dtype';
import { InvalidArgument } from '../errors';
import type { Tensor } from '../tensor/tensor';
// types only: ask.ts applies the ablations, this file prepares them
import type { AskOptions, AskResult } from './ask';

/** `links`, when given, limits `zeroed` to those outer links' messages (e.g. the feedback: the first hand-off kept). */
export type MessageAblation =
  | { kind: 'zeroed'; links?: readonly string[] }
  | { kind: 'removed'; links: readonly string[] }
  | { kind: 'replaced'; from: RecordedMessages };

/**
 * Whether the stage that fills the slots of `fill` (its links) runs without them under `ablation`: every link it reads
 * is removed. One that reads some removed links and some kept ones has no prompt to run, and is refused.
 */
export function removesStage(fill: readonly string[], ablation: MessageAblation | undefined, where: string): boolean {
  if (ablation?.kind !== 'removed' || !fill.length) return false;
  const gone = fill.filter((link) => ablation.links.includes(link));
  if (!gone.length) return false;
  if (gone.length < fill.length)
    throw new InvalidArgument(
      `message ablation: ${where} reads ${fill.join(', ')}; removing only ${gone.join(', ')} leaves a prompt no template ` +
        'has: remove all of its links or none',
    );
  return true;
}

/**
 * An ablation as a caller asks for it (`rmas ask --zero_messages` or `--messages_from QUESTION`, the tab's
 * AskRequest.ablation): 'from' names the donor question whose messages replace the question's own.
 */
export type AblationChoice = { kind: 'zeroed' } | { kind: 'from'; question: string };

/** One message as a run sent it, on the host. */
export interface RecordedMessage {
  shape: number[];
  dtype: DType;
  data: Float32Array;
}

/** The messages of one run, by messageKey(round, link). */
export interface RecordedMessages {
  question: string;
  messages: Map<string, RecordedMessage>;
}

/** The key of link `link`'s message in 0-based round `round`. */
export const messageKey = (round: number, link: string) => `${round}:${link}`;

/** A message copied to the host, for a later run's `replaced` ablation. */
export async function recordMessage(L: Tensor): Promise<RecordedMessage> {
  return { shape: [...L.shape], dtype: L.dtype, data: await L.read() };
}

/**
 * The message to send in place of `L` (link `link`, 0-based `round`), on L's backend and in L's dtype. L is
 * disposed once replaced; on an error it is left to the caller. Without an ablation (or one that spares `link`), L itself;
 * so too under `removed`, whose receivers do not read it (removesStage).
 */
export function ablateMessage(L: Tensor, round: number, link: string, ablation: MessageAblation | undefined): Tensor {
  if (!ablation || ablation.kind === 'removed') return L;
  if (ablation.kind === 'zeroed' && ablation.links && !ablation.links.includes(link)) return L;
  const replacement = ablation.kind === 'zeroed' ? L.backend.zeros(L.shape, L.dtype) : recorded(L, round, link, ablation.from);
  L.dispose();
  return replacement;
}

function recorded(L: Tensor, round: number, link: string, from: RecordedMessages): Tensor {
  const m = from.messages.get(messageKey(round, link));
  const where = `${link} in round ${round + 1}`;
  if (!m)
    throw new InvalidArgument(
      `message ablation: the run on "${from.question}" sent nothing on ${where}; record it with as many rounds as this run`,
    );
  if (m.shape.length !== L.shape.length || m.shape.some((n, i) => n !== L.shape[i]))
    throw new InvalidArgument(
      `message ablation: the recorded message on ${where} is [${m.shape}], this run sends [${L.shape}]; ` +
        'record it with the same latent steps and system',
    );
  const f32 = L.backend.fromBytes(new Uint8Array(m.data.buffer, m.data.byteOffset, m.data.byteLength), m.shape, 'f32');
  if (L.dtype === 'f32') return f32;
  try {
    return noGrad(() => F.cast(f32, L.dtype));
  } finally {
    f32.dispose();
  }
}

/**
 * `choice` checked before any run, with the donor question trimmed: refused (`refuse(why)` thrown) when it is neither
 * kind, outside latent mode (text mode sends no latent message to replace) or with an empty donor. `name` says
 * what the caller calls the ablation, e.g. a flag.
 */
export function checkAblation(
  choice: AblationChoice | undefined,
  mode: string,
  name: string,
  refuse: (why: string) => Error = (why) => new InvalidArgument(why),
): AblationChoice | undefined {
  if (choice === undefined) return undefined;
  const from = choice.kind === 'from' && typeof choice.question === 'string';
  if (choice.kind !== 'zeroed' && !from)
    throw refuse(`${name} must be {kind: 'zeroed'} or {kind: 'from', question}, got ${JSON.stringify(choice)}`);
  if (mode !== 'latent') throw refuse(`${name} replaces latent messages; text mode sends none`);
  if (choice.kind === 'zeroed') return choice;
  const question = choice.question.trim();
  if (!question) throw refuse(`${name}: the donor question is empty`);
  return { kind: 'from', question };
}

/**
 * The ablation to ask with, for a checked `choice`. 'from' first asks the donor through `ask` with `settings(donor)`
 * (what the question itself gets, task-dependent defaults included), no answer retry, and its messages recorded;
 * `donor` is that run (its seconds are not the question's).
 */
export async function prepareAblation(
  choice: AblationChoice | undefined,
  settings: (question: string) => Omit<AskOptions, 'question'>,
  ask: (opts: AskOptions) => Promise<AskResult>,
): Promise<{ ablation?: MessageAblation; donor?: AskResult }> {
  if (!choice) return {};
  if (choice.kind === 'zeroed') return { ablation: { kind: 'zeroed' } };
  const donor = await ask({ ...settings(choice.question), question: choice.question, answerRetry: false, recordMessages: true });
  return { ablation: { kind: 'replaced', from: donor.messages! }, donor };
}

/** How a result names its ablation (`rmas ask --json`'s "messages", the tab's history): 'zeroed' or 'from: QUESTION'. */
export const ablationLabel = (choice: AblationChoice): string => (choice.kind === 'zeroed' ? 'zeroed' : `from: ${choice.question.trim()}`);
