/**
 * What `npm run bench:realsize` relies on, without timing it (issue 38): the models it makes have the released
 * configs (layer counts, widths, heads, vocabularies; Llama-3.2-1B's and Gemma-3-1B's published parameter counts), the
 * folders it writes load in the engine with the family's real tokenizer, and its PyTorch peer
 * (scripts/peer/torch_decode.py) and its transformers.js peer (an ONNX export laid out as at real size, in chunked
 * external data, on onnxruntime-node's CPU EP and on onnxruntime-web's WebAssembly EP) write the greedy ids ours writes,
 * on each family they cover, at a test's size (the same config fields and code paths, few small layers); the table's
 * peer ratios and id checks.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generate } from '../src/model/generate';
import { loadDecoderFromDir } from '../src/model';
import { parseDecoderConfig } from '../src/model/config';
import { weightSpecs } from '../src/model/weights';
import { CpuBackend } from '../src/tensor/cpu';
import { REALSIZE_MODELS, makeRealsizeModel, realsizeModel, scaledDown } from '../bench/realsize/models';
import { type Sample, promptIds, realsizeRows } from '../bench/realsize';
import { ensureOnnxExport } from '../bench/peer-export';
import { runTheirsOnce } from '../src/ui/realsize-run';

const root = mkdtempSync(join(tmpdir(), 'rmas-realsize-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The released text decoders (their config.json on the hub): layers, hidden, intermediate, heads / kv heads, vocab. */
const RELEASED: Record<string, [number, number, number, number, number, number]> = {
  'Qwen3-0.6B': [28, 1024, 3072, 16, 8, 151936],
  'Qwen3.5-0.8B': [24, 1024, 3584, 8, 2, 248320],
  'Llama-3.2-1B': [16, 2048, 8192, 32, 8, 128256],
  'Gemma-3-1B': [26, 1152, 6912, 4, 1, 262144],
  'Qwen3-1.7B': [28, 2048, 6144, 16, 8, 151936],
};

/** Ours on the CPU backend: 8 greedy ids after the prompt, and the prompt's last logits (the peers' checks). */
async function oursOn(dir: string, ids: number[]): Promise<{ ours: number[]; logits: Float32Array }> {
  const model = await loadDecoderFromDir(dir, new CpuBackend('f32'));
  const ours = (await generate(model, { inputIds: ids, maxNewTokens: 8, sampling: { greedy: true }, eosTokenIds: [] })).tokens;
  const be = model.weights.backend;
  const logits = await model.forward({ inputIds: be.fromValues(ids, [ids.length], 'i32'), cache: model.newCache(ids.length),
    logits: 'last' }).logits!.read();
  model.dispose();
  return { ours, logits };
}

describe('bench:realsize models', () => {
  it('have the released configs', () => {
    expect(REALSIZE_MODELS.map((m) => m.name)).toEqual(Object.keys(RELEASED));
    const params: Record<string, number> = {};
    for (const m of REALSIZE_MODELS) {
      const c = parseDecoderConfig(JSON.stringify(m.config), m.name);
      expect([c.layers, c.hidden, c.intermediate, c.heads, c.kvHeads, c.vocabSize], m.name).toEqual(RELEASED[m.name]);
      params[m.name] = weightSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
    }
    // the counts the hub's model pages give (tied embeddings counted once)
    expect(params['Llama-3.2-1B']).toBe(1_235_814_400);
    expect(params['Gemma-3-1B']).toBe(999_885_952);
    expect(params['Qwen3-0.6B']).toBe(596_049_920);
    // Qwen3.5-0.8B: 18 Gated DeltaNet layers and 6 gated attention layers of the 0.8B's text decoder
    const q35 = parseDecoderConfig(JSON.stringify(realsizeModel('Qwen3.5-0.8B').config));
    expect([q35.linearLayers.filter(Boolean).length, q35.deltaNet?.valueHeads, q35.deltaNet?.keyDim]).toEqual([18, 16, 128]);
  });

  it("the PyTorch peer writes ours's greedy ids on every family it covers (a test's size)", async () => {
    for (const name of ['Qwen3-0.6B', 'Llama-3.2-1B', 'Gemma-3-1B', 'Qwen3.5-0.8B']) {
      const m = scaledDown(realsizeModel(name));
      const dir = await makeRealsizeModel(m, root);
      const ids = (await promptIds(dir, 12)).map((x) => x % 512);
      const { ours, logits } = await oursOn(dir, ids);
      const args = ['scripts/peer/torch_decode.py', dir, '--ids', ids.join(','), '--new', '8', '--logits'];
      const out = execFileSync('/usr/bin/python3', args, { encoding: 'utf8' });
      const theirs = JSON.parse(out) as { ids: number[]; logits: number[] };
      expect(theirs.ids, name).toEqual(ours);
      // the prompt's logits agree to float32 rounding, relative to their spread (the ids alone could agree by luck)
      const peak = Math.max(...theirs.logits.map(Math.abs));
      const diff = Math.max(...theirs.logits.map((v, i) => Math.abs(v - logits[i]!)));
      expect(theirs.logits.length).toBe(512);
      expect(diff / peak, name).toBeLessThan(1e-5);
    }
  }, 120_000);

  it('writes a model folder once, with the family tokenizer, and reuses it', async () => {
    const m = scaledDown(realsizeModel('Qwen3.5-0.8B'));
    const dir = await makeRealsizeModel(m, root);
    const made = statSync(join(dir, 'model.safetensors')).mtimeMs;
    expect(await makeRealsizeModel(m, root)).toBe(dir);
    expect(statSync(join(dir, 'model.safetensors')).mtimeMs).toBe(made);
    const ids = await promptIds(dir, 20);
    expect(ids.length).toBe(20);
    const model = await loadDecoderFromDir(dir, new CpuBackend('f32'));
    const r = await generate(model, { inputIds: ids.map((x) => x % 512), maxNewTokens: 4, sampling: { greedy: true }, eosTokenIds: [] });
    expect(r.tokens.length).toBe(4);
    expect(r.tokens.every((t) => t >= 0 && t < 512)).toBe(true);
    model.dispose();
  });

  it("transformers.js (onnxruntime-node, CPU EP) writes ours's greedy ids from the exporter's chunked layout", async () => {
    const { AutoModelForCausalLM, Tensor, env } = await import('@huggingface/transformers');
    const onnxRoot = join(root, 'onnx');
    // Gemma 3 at a test's size: a sliding window of 4 and a global layer, so the 12-id prompt crosses the window
    for (const name of ['Qwen3-0.6B', 'Llama-3.2-1B', 'Gemma-3-1B']) {
      const m = scaledDown(realsizeModel(name));
      const dir = await makeRealsizeModel(m, root);
      // 0.05 MiB chunks: several external data files, as a real-size export writes (1 GiB each)
      const exported = ensureOnnxExport(dir, onnxRoot, () => {}, { externalDataMib: 0.05 });
      const cfg = JSON.parse(readFileSync(join(exported, 'config.json'), 'utf8')) as Record<string, { use_external_data_format: number }>;
      expect(cfg['transformers.js_config']!.use_external_data_format, name).toBeGreaterThan(1);
      const ids = (await promptIds(dir, 12)).map((x) => x % 512);
      const { ours, logits: want } = await oursOn(dir, ids);
      env.allowRemoteModels = false;
      env.localModelPath = `${onnxRoot}/`;
      const load = () => AutoModelForCausalLM.from_pretrained(m.name, { device: 'cpu', dtype: 'fp32' });
      const theirs = await runTheirsOnce(load, ids, 8);
      expect(theirs.ids, name).toEqual(ours);
      // the prompt's logits agree to float32 rounding, relative to their spread (random weights repeat ids)
      const tm = await load();
      const big = BigInt64Array.from(ids, BigInt);
      const out = (await tm({ input_ids: new Tensor('int64', big, [1, ids.length]),
        attention_mask: new Tensor('int64', big.map(() => 1n), [1, ids.length]) })) as { logits: { data: Float32Array } };
      await tm.dispose();
      const got = out.logits.data.subarray(out.logits.data.length - 512);
      const peak = Math.max(...Array.from(want, Math.abs));
      const diff = Math.max(...Array.from(got, (v, i) => Math.abs(v - want[i]!)));
      expect(diff / peak, name).toBeLessThan(1e-5);
    }
  }, 120_000);

  it("transformers.js on onnxruntime-web's WebAssembly EP (tjs-wasm) writes ours's greedy ids, in a process of its own", async () => {
    const m = scaledDown(realsizeModel('Qwen3-0.6B'));
    const dir = await makeRealsizeModel(m, root);
    const onnxRoot = join(root, 'onnx');
    ensureOnnxExport(dir, onnxRoot, () => {}, { externalDataMib: 0.05 });
    const ids = (await promptIds(dir, 12)).map((x) => x % 512);
    const { ours, logits: want } = await oursOn(dir, ids);
    // transformers.js binds its ONNX Runtime when first imported, and this process has imported it on onnxruntime-node
    const out = execFileSync(process.execPath, ['--import', 'tsx', 'bench/realsize/ort-web.ts', onnxRoot, m.name, ids.join(','), '8', '2'],
      { encoding: 'utf8' });
    const theirs = JSON.parse(out.trim().split('\n').at(-1)!) as { ids: number[]; logits: number[] };
    expect(theirs.ids).toEqual(ours);
    expect(theirs.logits.length).toBe(512);
    const peak = Math.max(...Array.from(want, Math.abs));
    const diff = Math.max(...theirs.logits.map((v, i) => Math.abs(v - want[i]!)));
    expect(diff / peak).toBeLessThan(1e-5);
  }, 120_000);

  it("the table compares ours with its adapter's peers only when their ids equal ours", () => {
    const s = (engine: Sample['engine'], prefill: number, decode: number, ids = [1, 2, 3]): Sample => ({
      engine, model: 'M', prompt: 8, ids, loadS: 1, rssMiB: 100, prefillTokS: prefill, decodeTokS: decode, latentStepS: null,
      weightBytesPerToken: null, threads: 1,
    });
    const samples = [s('ours-cpu', 4, 2), s('ours-cpu', 6, 2), s('torch', 10, 1), s('tjs-cpu', 5, 4, [1, 2, 4]),
      s('ours-webgpu', 1, 0.5), s('tjs-webgpu', 2, 0.25)];
    const { rows, lines } = realsizeRows(samples, {
      models: ['M'], prompts: [8], engines: ['ours-cpu', 'torch', 'tjs-cpu', 'ours-webgpu', 'tjs-webgpu'], bandwidth: 1e10,
      stamp: 'now', newTokens: 4,
    });
    expect(rows).toHaveLength(5);
    // ours-cpu: prefill median 5 over torch's 10, decode 2 over 1; tjs-cpu's ids differ, so no ratio
    expect(rows[0]).toContain('0.50× / 2.00× torch; tjs-cpu: ids differ');
    expect(rows[2]).toContain('(ids differ)');
    expect(rows[3]).toContain('0.50× / 2.00× tjs-webgpu');
    expect(lines.map((l) => (JSON.parse(l) as { ids_match: boolean }).ids_match)).toEqual([true, true, false, true, true]);
    // a quantized engine picks its own ids: its speed is compared with ours-cpu all the same, and its ids with nothing
    const q = realsizeRows([...samples, s('ours-cpu-q4_0', 10, 3, [7, 8, 9])], {
      models: ['M'], prompts: [8], engines: ['ours-cpu-q4_0', 'ours-cpu'], bandwidth: 1e10, stamp: 'now', newTokens: 4,
    });
    expect(q.rows[0]).toContain('2.00× / 1.50× ours-cpu');
    expect(q.rows[0]).not.toContain('ids differ');
    expect(q.lines.map((l) => (JSON.parse(l) as { ids_match: boolean | null }).ids_match)).toEqual([null, true]);
  });
});
