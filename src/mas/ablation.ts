/**
 * Message ablations: a run of a system with every latent message its outer links send replaced, to measure
 * what the messages carry. `zeroed` sends zeros of the message's shape; `replaced` sends the messages that a
 * run on another question sent (recorded with AskOptions.recordMessages): the "shuffled" control, in which
 * each receiver reads a message about a different question in the same place and form.
 */
import { F, noGrad } from '../autograd';
import type { DType } from '../formats/dtype';
import { InvalidArgument } from '../errors';
import type { Tensor } from '../tensor/tensor';

export type MessageAblation = { kind: 'zeroed' } | { kind: 'replaced'; from: RecordedMessages };

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
 * disposed once replaced; on an error it is left to the caller. Without an ablation, L itself.
 */
export function ablateMessage(L: Tensor, round: number, link: string, ablation: MessageAblation | undefined): Tensor {
  if (!ablation) return L;
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
