/** A decoder from a local Hugging Face model folder (Node): config.json + model.safetensors (single or sharded). */
import { MissingCheckpoint } from '../errors';
import { openCheckpoint } from '../formats/safetensors-sharded';
import type { Backend } from '../tensor/backend';
import { parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import type { LoadOptions } from './weights';
import { loadDecoderWeights } from './weights';
import { nodeImport } from '../util/node-import';

export async function loadDecoderFromDir(dir: string, backend: Backend, opts: LoadOptions & { what?: string } = {}): Promise<Decoder> {
  const fs = await nodeImport('node:fs/promises');
  const base = dir.replace(/\/+$/, '');
  const configFile = `${base}/config.json`;
  let text: string;
  try {
    text = await fs.readFile(configFile, 'utf8');
  } catch (e) {
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
