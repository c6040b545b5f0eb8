/**
 * `rmas` as a child process (bin/rmas.js → tsx → src/runner/cli.ts) on the committed tiny Qwen3: its output
 * files and text equal what the engine computes in-process on the same backend (exactly: same kernels,
 * same inputs). Few processes, each start costs about a second.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SafetensorsFile, writeSafetensors } from '../src/formats/safetensors';
import { openCheckpoint } from '../src/formats/safetensors-sharded';
import { fileSource } from '../src/formats/sources';
import { Decoder, generate, loadDecoderWeights, parseDecoderConfig } from '../src/model';
import type { Backend } from '../src/tensor/backend';
import { CpuBackend } from '../src/tensor/cpu';
import { loadTokenizerFromDir } from '../src/tokenizer';
import { gpuBackend } from './util/gpu';

const DIR = 'models/tiny/qwen3-tiny';
const IDS = [72, 101, 108, 108, 111, 44, 32, 119, 458, 3];
const tmp = mkdtempSync(join(tmpdir(), 'rmas-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function rmasAt(launcher: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(process.execPath, [launcher, ...args], { encoding: 'utf8' }, (err, stdout, stderr) => {
      res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

const rmas = (...args: string[]) => rmasAt('bin/rmas.js', ...args);

async function load(backend: Backend) {
  const config = parseDecoderConfig(readFileSync(`${DIR}/config.json`, 'utf8'));
  return new Decoder(config, await loadDecoderWeights(config, await openCheckpoint(DIR), backend));
}

async function readOut(path: string) {
  const f = await SafetensorsFile.open(fileSource(path));
  const get = async (n: string) => {
    const t = await f.read(n);
    expect(t.dtype).toBe('F32');
    return { shape: [...t.shape], values: new Float32Array(t.bytes.slice().buffer) };
  };
  return { hidden: await get('hidden_states'), logits: await get('logits') };
}

async function inProcess(model: Decoder, ids: number[]) {
  const r = model.forward({ inputIds: model.backend.fromValues(ids, [ids.length], 'i32'), logits: 'all' });
  return { hidden: await r.hidden.read(), logits: await r.logits!.read() };
}

describe('rmas forward', () => {
  it('--ids on cpu and webgpu writes the in-process hidden states and logits', async () => {
    const outs = { cpu: join(tmp, 'cpu.safetensors'), webgpu: join(tmp, 'gpu.safetensors') };
    const run = await rmas('forward', '--model', DIR, '--ids', IDS.join(','), '--out', outs.cpu, '--backend', 'cpu');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/backend: cpu/);
    const gpuRun = await rmas('forward', '--model', DIR, '--ids', IDS.join(','), '--out', outs.webgpu, '--backend', 'webgpu');
    expect(gpuRun.code, gpuRun.stderr).toBe(0);
    expect(gpuRun.stderr).toMatch(/backend: webgpu/);

    const cpuModel = await load(new CpuBackend('f32'));
    const gpuModel = await load(await gpuBackend());
    for (const [path, model] of [[outs.cpu, cpuModel], [outs.webgpu, gpuModel]] as const) {
      const got = await readOut(path);
      const want = await inProcess(model, IDS);
      expect(got.hidden.shape).toEqual([IDS.length, model.config.hidden]);
      expect(got.logits.shape).toEqual([IDS.length, model.config.vocabSize]);
      expect(got.hidden.values).toEqual(want.hidden);
      expect(got.logits.values).toEqual(want.logits);
    }
    gpuModel.weights.dispose();
  });

  it('--embeds with inputs_embeds = embed(ids) gives the --ids result', async () => {
    const model = await load(new CpuBackend('f32'));
    const emb = await model.embed(model.backend.fromValues(IDS, [IDS.length], 'i32')).read();
    const embFile = join(tmp, 'embeds.safetensors');
    writeFileSync(
      embFile,
      writeSafetensors({ inputs_embeds: { dtype: 'F32', shape: [IDS.length, model.config.hidden], bytes: new Uint8Array(emb.buffer) } }),
    );
    const out = join(tmp, 'from-embeds.safetensors');
    const run = await rmas('forward', '--model', DIR, '--embeds', embFile, '--out', out, '--backend', 'cpu');
    expect(run.code, run.stderr).toBe(0);
    const got = await readOut(out);
    const want = await inProcess(model, IDS);
    expect(got.hidden.values).toEqual(want.hidden);
    expect(got.logits.values).toEqual(want.logits);
  });
});

describe('rmas generate', () => {
  it('--greedy prints the in-process greedy text and the tokens/s', async () => {
    const run = await rmas('generate', '--model', DIR, '--prompt', 'Hello, w', '--greedy', '--max-new-tokens', '12', '--backend', 'cpu');
    expect(run.code, run.stderr).toBe(0);
    const model = await load(new CpuBackend('f32'));
    const tok = await loadTokenizerFromDir(DIR);
    const r = await generate(model, {
      inputIds: tok.encode('Hello, w'), maxNewTokens: 12, sampling: { greedy: true },
      eosTokenIds: [...new Set([458, 456, ...model.config.eosTokenIds, ...tok.eosTokenIds])],
    });
    expect(run.stdout).toBe(`${tok.decode(r.tokens, { skipSpecialTokens: true })}\n`);
    expect(run.stderr).toMatch(
      new RegExp(`${r.tokens.length} tokens, stopped by ${r.stoppedBy}; prefill [\\d.]+ tokens/s .*decode [\\d.]+ tokens/s`),
    );
  });

  it('runs through a bin link (as npx does) and names a truncated checkpoint', async () => {
    // npm starts bins through a link whose path differs from the launcher's own
    const link = join(tmp, 'rmas');
    symlinkSync(resolve('bin/rmas.js'), link);
    const broken = join(tmp, 'broken');
    cpSync(DIR, broken, { recursive: true });
    const st = readFileSync(`${DIR}/model.safetensors`);
    writeFileSync(join(broken, 'model.safetensors'), st.subarray(0, st.length - 1000));
    const run = await rmasAt(link, 'forward', '--model', broken, '--ids', '1,2', '--out', join(tmp, 'x.safetensors'), '--backend', 'cpu');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/rmas: CorruptCheckpoint: .*broken\/model\.safetensors: .*truncated/);
  });

  it('--kv_dtype: the cache the steps use (f32 on the CPU by default, f16 on a WebGPU device with shader-f16)', async () => {
    const json = async (...flags: string[]) => {
      const run = await rmas('generate', '--model', DIR, '--prompt', 'Hello, w', '--greedy', '--max-new-tokens', '12', '--json', ...flags);
      expect(run.code, run.stderr).toBe(0);
      return JSON.parse(run.stdout) as { text: string; kv_dtype: string };
    };
    const tok = await loadTokenizerFromDir(DIR);
    const inProcessText = async (kv: 'f16' | 'f32') => {
      const model = await load(new CpuBackend('f32'));
      model.kvDtype = kv;
      const r = await generate(model, {
        inputIds: tok.encode('Hello, w'), maxNewTokens: 12, sampling: { greedy: true },
        eosTokenIds: [...new Set([458, 456, ...model.config.eosTokenIds, ...tok.eosTokenIds])],
      });
      return tok.decode(r.tokens, { skipSpecialTokens: true });
    };
    const cpu = await json('--backend', 'cpu');
    expect(cpu).toMatchObject({ kv_dtype: 'f32', text: await inProcessText('f32') });
    const cpu16 = await json('--backend', 'cpu', '--kv_dtype', 'f16');
    expect(cpu16).toMatchObject({ kv_dtype: 'f16', text: await inProcessText('f16') });
    // lavapipe has shader-f16: the device's default is the f16 cache, and it writes what the CPU writes on one
    const gpu = await json('--backend', 'webgpu');
    expect(gpu).toMatchObject({ kv_dtype: 'f16', text: cpu16.text });
    expect(await json('--backend', 'webgpu', '--kv_dtype', 'f32')).toMatchObject({ kv_dtype: 'f32', text: cpu.text });
    const bad = await rmas('generate', '--model', DIR, '--prompt', 'x', '--kv_dtype', 'bf16', '--backend', 'cpu');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^rmas: --kv_dtype bf16: expected auto, f32 or f16\n/);
  });

  it('exits 2 with the command\'s usage on a bad flag', async () => {
    const run = await rmas('generate', '--model', DIR, '--bogus');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/Unknown option '--bogus'/);
    // that command's usage alone
    expect(run.stderr).toMatch(/usage:\n {2}rmas generate --model DIR/);
    expect(run.stderr).not.toContain('rmas forward');
  });
});
