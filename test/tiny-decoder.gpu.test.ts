/**
 * The committed tiny models (models/tiny) through the whole loading path: config.json, the bf16
 * safetensors checkpoint, the tokenizer and the Decoder, against the independent plain-JS f64
 * reference forward, on the f64 CPU backend (exact) and WebGPU in Node (f32).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { decode } from '../src/formats/encode';
import { openCheckpoint } from '../src/formats/safetensors-sharded';
import { Decoder, loadDecoderWeights, parseDecoderConfig } from '../src/model';
import { referenceEmbed, referenceForward, scaledError } from '../src/testing/model';
import { CpuBackend } from '../src/tensor/cpu';
import { loadTokenizerFromDir } from '../src/tokenizer';
import { gpuBackend } from './util/gpu';

const PROMPT = 'The answer is 42. Add 17 and 25.';

for (const name of ['qwen3-tiny', 'llama-tiny', 'qwen2-tiny']) {
  describe(`models/tiny/${name}`, () => {
    const dir = `models/tiny/${name}`;

    async function setup() {
      const config = parseDecoderConfig(readFileSync(`${dir}/config.json`, 'utf8'), `${dir}/config.json`);
      const store = await openCheckpoint(dir);
      const tok = await loadTokenizerFromDir(dir);
      const ids = tok.encode(PROMPT, { addSpecialTokens: false });
      const ref = new Map<string, { values: Float64Array }>();
      for (const n of store.names()) {
        const t = await store.read(n);
        ref.set(n, { values: Float64Array.from(decode('bf16', t.bytes, t.shape)) });
      }
      const want = referenceForward(config, ref, referenceEmbed(config, ref, ids));
      return { config, store, ids, want };
    }

    it('matches the f64 reference exactly on the f64 CPU backend, cached and whole', async () => {
      const { config, store, ids, want } = await setup();
      const cpu = new CpuBackend('f64');
      const model = new Decoder(config, await loadDecoderWeights(config, store, cpu));
      await store.close();
      const out = model.forward({ inputIds: cpu.fromValues(ids, [ids.length], 'i32'), logits: 'all' });
      expect(scaledError(await out.hidden.read(), want.hidden)).toBeLessThan(1e-6); // read() rounds to f32
      expect(scaledError(cpu.data(out.logits!), want.logits)).toBeLessThan(1e-12);
      // token by token through the KV cache: the last logits row equals the whole-sequence one
      const cache = model.newCache(ids.length);
      let last: Float64Array | null = null;
      for (const id of ids) {
        const step = model.forward({ inputIds: cpu.fromValues([id], [1], 'i32'), cache, logits: 'last' });
        last = Float64Array.from(cpu.data(step.logits!) as Float64Array);
      }
      const V = config.vocabSize;
      expect(scaledError(last!, want.logits.subarray((ids.length - 1) * V))).toBeLessThan(1e-12);
    });

    it('matches the reference on WebGPU within f32 tolerance', async () => {
      const { config, store, ids, want } = await setup();
      const gpu = await gpuBackend();
      const weights = await loadDecoderWeights(config, store, gpu);
      await store.close();
      const model = new Decoder(config, weights);
      const out = model.forward({ inputIds: gpu.fromValues(ids, [ids.length], 'i32'), logits: 'all' });
      expect(scaledError(await out.hidden.read(), want.hidden)).toBeLessThan(1e-5);
      expect(scaledError(await out.logits!.read(), want.logits)).toBeLessThan(1e-5);
      out.hidden.dispose();
      out.logits!.dispose();
      weights.dispose();
    });
  });
}
