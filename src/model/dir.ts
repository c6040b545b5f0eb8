/** A decoder from a local Hugging Face model folder (Node): config.json + model.safetensors (single or sharded). */
import { MissingCheckpoint } from '../errors';
import { openCheckpoint } from '../formats/safetensors-sharded';
import type { Backend } from '../tensor/backend';
import { parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import type { LoadOptions } from './weights';
import { loadDecoderWeights } from './weights';

export async function loadDecoderFromDir(dir: string, backend: Backend, opts: LoadOptions & { what?: string } = {}): Promise<Decoder> {
  const FS_MODULE = 'node:fs/promises'; // a variable keeps bundlers from resolving node:fs for the page
  const fs = (await import(/* @vite-ignore */ FS_MODULE)) as typeof import('node:fs/promises');
  const base = dir.replace(/\/+$/, '');
  const configFile = `${base}/config.json`;
  let text: string;
  try {
    text = await fs.readFile(configFile, 'utf8');
  } catch (e) {
    throw new MissingCheckpoint(`${opts.what ?? 'model'}: cannot read ${configFile} (${(e as Error).message}); give a Hugging Face model folder`);
  }
  const config = parseDecoderConfig(text, configFile);
  const store = await openCheckpoint(base);
  try {
    return new Decoder(config, await loadDecoderWeights(config, store, backend, opts));
  } finally {
    await store.close();
  }
}
