/**
 * Where a decoder's tensors sit in a checkpoint. The engine names every tensor as a text-only checkpoint does
 * (`model.layers.0.…`, `lm_head.weight`); image-text checkpoints (Gemma 3, Qwen3.5) keep the same decoder under
 * another prefix, beside a vision tower, a projector and (Qwen3.5) multi-token-prediction tensors that the engine
 * never reads. Two image-text spellings exist in the wild:
 *   - `language_model.model.*` with `language_model.lm_head.*` (transformers < 4.52, e.g. gemma-3-4b-it as released);
 *   - `model.language_model.*` with `lm_head.*` (transformers ≥ 4.52, e.g. Qwen3.5, re-saved Gemma 3).
 * The layout is told by where the embedding table is; a source wrapped by `layoutSource` answers to the engine's
 * names and reads only the tensors asked for, so a URL source fetches only their byte ranges.
 */
import { CorruptCheckpoint } from '../errors';
import type { WeightSource } from './weights';

export interface TensorLayout {
  /** What `model.` becomes. */
  model: string;
  /** What `lm_head.` becomes. */
  lmHead: string;
  /** For messages: 'text-only' or which image-text spelling. */
  label: string;
}

export const LAYOUTS: readonly TensorLayout[] = [
  { model: 'model.', lmHead: 'lm_head.', label: 'text-only' },
  { model: 'model.language_model.', lmHead: 'lm_head.', label: 'image-text (model.language_model.*)' },
  { model: 'language_model.model.', lmHead: 'language_model.lm_head.', label: 'image-text (language_model.model.*)' },
];

const EMBED = 'embed_tokens.weight';

/** The layout of `src`: the one whose embedding table it holds. */
export function detectLayout(src: Pick<WeightSource, 'name' | 'has'>): TensorLayout {
  const found = LAYOUTS.filter((l) => src.has(l.model + EMBED));
  if (found.length === 1) return found[0]!;
  if (found.length > 1) {
    throw new CorruptCheckpoint(`${src.name} holds a decoder under several prefixes (${found.map((l) => l.model).join(', ')}); ` +
      'it is not one model: re-download it');
  }
  throw new CorruptCheckpoint(
    `${src.name} has no embedding table under any known prefix (${LAYOUTS.map((l) => l.model + EMBED).join(', ')}); ` +
      'the checkpoint is incomplete or not a decoder: re-download it',
  );
}

/** The stored name of an engine name under `layout`. */
export function storedName(layout: TensorLayout, name: string): string {
  if (name.startsWith('model.')) return layout.model + name.slice('model.'.length);
  if (name.startsWith('lm_head.')) return layout.lmHead + name.slice('lm_head.'.length);
  return name;
}

/** `src` answering to the engine's names (a text-only source is returned as it is). */
export function layoutSource(src: WeightSource, layout: TensorLayout = detectLayout(src)): WeightSource {
  if (layout === LAYOUTS[0]) return src;
  const map = (n: string) => storedName(layout, n);
  return {
    name: src.name,
    has: (n) => src.has(map(n)),
    read: (n) => src.read(map(n)),
    ...(src.readStorage ? { readStorage: (n: string) => src.readStorage!(map(n)) } : {}),
  };
}
