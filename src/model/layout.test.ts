// Released checkpoint layouts: the decoder under a text-only or an image-text prefix loads to the same weights,
// and the tensors beside it (vision tower, projector, multi-token prediction) are never read.
import { describe, expect, it } from 'vitest';
import { SafetensorsFile, writeSafetensors } from '../formats/safetensors';
import { CpuBackend } from '../tensor/cpu';
import { LAYOUTS, detectLayout, layoutSource, storedName } from './layout';
import { bf16Tensor, tinyConfig, tinyTensors } from '../testing/model';
import { Decoder } from './decoder';
import { readFileSync } from 'node:fs';
import { openCheckpoint } from '../formats/safetensors-sharded';
import { parseDecoderConfig } from './config';
import { type WeightSource, loadDecoderWeights } from './weights';

const config = tinyConfig('qwen3', { tie_word_embeddings: false });
const tensors = tinyTensors(config, 5);

/** The tiny decoder's tensors under `layout`, plus tensors of the parts the engine must not read. */
function checkpoint(layout: (typeof LAYOUTS)[number]): Promise<SafetensorsFile> {
  const named = [...tensors].map(([n, t]) => [storedName(layout, n), bf16Tensor(t.shape, t.values)] as const);
  const extra = [
    ['model.visual.blocks.0.attn.qkv.weight', bf16Tensor([6, 4], new Float64Array(24).fill(1))],
    ['vision_tower.vision_model.embeddings.patch_embedding.weight', bf16Tensor([4, 3], new Float64Array(12).fill(1))],
    ['multi_modal_projector.mm_input_projection_weight', bf16Tensor([4, 4], new Float64Array(16).fill(1))],
    ['mtp.layers.0.mlp.up_proj.weight', bf16Tensor([8, 4], new Float64Array(32).fill(1))],
  ] as const;
  return SafetensorsFile.fromBytes(writeSafetensors([...named, ...(layout === LAYOUTS[0] ? [] : extra)]), `ckpt (${layout.label})`);
}

/** `src` counting which tensors are read. */
function counted(src: WeightSource): { src: WeightSource; reads: string[] } {
  const reads: string[] = [];
  return { reads, src: { name: src.name, has: (n) => src.has(n), read: (n) => { reads.push(n); return src.read(n); } } };
}

describe('released layouts', () => {
  it('maps the engine names to each prefix: model.* / model.language_model.* / language_model.model.*, lm_head beside them', () => {
    expect(LAYOUTS.map((l) => [storedName(l, 'model.layers.0.mlp.up_proj.weight'), storedName(l, 'lm_head.weight')])).toEqual([
      ['model.layers.0.mlp.up_proj.weight', 'lm_head.weight'],
      ['model.language_model.layers.0.mlp.up_proj.weight', 'lm_head.weight'],
      ['language_model.model.layers.0.mlp.up_proj.weight', 'language_model.lm_head.weight'],
    ]);
  });

  it('each layout loads the same decoder (same logits), reading the decoder tensors only', async () => {
    const cpu = new CpuBackend('f32');
    const ids = cpu.fromValues([1, 7, 3, 40], [4], 'i32');
    let want: Float32Array | null = null;
    for (const layout of LAYOUTS) {
      const file = await checkpoint(layout);
      expect(detectLayout(file)).toBe(layout);
      const { src, reads } = counted(file);
      const w = await loadDecoderWeights(config, src, cpu);
      // every read is a decoder tensor under this layout's prefix, each one once; nothing of the vision tower or mtp
      expect(reads.slice().sort()).toEqual([...tensors.keys()].map((n) => storedName(layout, n)).sort());
      const logits = await new Decoder(config, w).forward({ inputIds: ids, logits: 'all' }).logits!.read();
      if (want) expect(Array.from(logits)).toEqual(Array.from(want));
      else want = logits;
      w.dispose();
    }
  });

  it('names what it cannot find', async () => {
    const empty = await SafetensorsFile.fromBytes(writeSafetensors([['vision_tower.x', bf16Tensor([1], [1])]]), 'vision.safetensors');
    expect(() => detectLayout(empty)).toThrow(
      /vision\.safetensors has no embedding table under any known prefix \(model\.embed_tokens\.weight, model\.language_model\.embed_tokens\.weight, language_model\.model\.embed_tokens\.weight\)/,
    );
    const both = await SafetensorsFile.fromBytes(writeSafetensors([
      ['model.embed_tokens.weight', bf16Tensor([1], [1])], ['language_model.model.embed_tokens.weight', bf16Tensor([1], [1])],
    ]), 'two.safetensors');
    expect(() => detectLayout(both)).toThrow(/two\.safetensors holds a decoder under several prefixes/);
    const plain = await checkpoint(LAYOUTS[0]!);
    expect(layoutSource(plain)).toBe(plain); // text-only: the source itself
  });

  it('qwen3_5-tiny as released: every tensor read once but model.visual.* and mtp.*', async () => {
    const dir = 'models/tiny/qwen3_5-tiny';
    const c = parseDecoderConfig(readFileSync(`${dir}/config.json`, 'utf8'));
    const store = await openCheckpoint(dir);
    const all = [...store.names()];
    const { src, reads } = counted(store);
    const w = await loadDecoderWeights(c, src, new CpuBackend('f32'));
    const unread = all.filter((n) => n.startsWith('model.visual.') || n.startsWith('mtp.'));
    expect(unread.length).toBeGreaterThan(0);
    expect(reads.slice().sort()).toEqual(all.filter((n) => !unread.includes(n)).sort());
    w.dispose();
    await store.close();
  });
});
