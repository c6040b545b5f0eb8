/** A decoder from a local Hugging Face model folder (Node): config.json + model.safetensors (single or sharded). */
import { MissingCheckpoint, UnsafeModelFile } from '../errors';
import { readModelFile } from '../formats/model-file';
import { openCheckpoint } from '../formats/safetensors-sharded';
import type { Backend } from '../tensor/backend';
import { parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import type { LoadOptions } from './weights';
import { loadDecoderWeights } from './weights';

export async function loadDecoderFromDir(dir: string, backend: Backend, opts: LoadOptions & { what?: string } = {}): Promise<Decoder> {
  const base = dir.replace(/\/+$/, '');
  const configFile = `${base}/config.json`;
  let text: string;
  try {
    text = await readModelFile(configFile);
  } catch (e) {
    if (e instanceof UnsafeModelFile) throw e;
    throw new MissingCheckpoint(
      `${opts.what ?? 'model'}: cannot read ${configFile} (${(e as Error).message}); give a Hugging Face model folder`,
    );
  }
  const config = parseDecoderConfig(text, configFile);
  const store = await openCheckpoint(base);
  try {
    return new Decoder(config, await loadDecoderWeights(config, store, backend, opts));
  } finally {
    await store.close();
  }
}
