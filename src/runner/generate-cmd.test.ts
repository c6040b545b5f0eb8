/**
 * `rmas forward`, `rmas generate` and `rmas plan-memory` on hostile or oversized inputs, in-process on copies of the
 * committed tiny Qwen3 (2 layers, max_position_embeddings 512): a config.json that claims 1e9 layers or a negative
 * rms_norm_eps, or more layers than its checkpoint holds, is refused by name at once; --max_new_tokens past the context
 * stops there and says so up front; a prompt longer than the context is ContextTooLong; forward never replaces --out.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rmasInProcess as rmas } from '../../test/util/rmas';

const DIR = 'models/tiny/qwen3-tiny';
const tmp = mkdtempSync(join(tmpdir(), 'rmas-model-inputs-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A copy of the tiny model with config.json fields replaced. */
function copyWith(name: string, over: Record<string, unknown>): string {
  const dir = join(tmp, name);
  cpSync(DIR, dir, { recursive: true });
  const config = JSON.parse(readFileSync(join(DIR, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, ...over }));
  return dir;
}

/** The command's exit code, its error line and how long it took. */
async function timed(...argv: string[]) {
  const t0 = performance.now();
  const r = await rmas(...argv);
  return { ...r, ms: performance.now() - t0 };
}

describe('config.json sizes', () => {
  const huge = copyWith('huge', { num_hidden_layers: 1e9 });
  const limit = `InvalidModelConfig: ${huge}/config.json: 'num_hidden_layers' is 1000000000, above the limit of 1024 this engine accepts`;

  it('num_hidden_layers 1e9: rmas forward and rmas plan-memory fail at once with InvalidModelConfig naming value and limit', async () => {
    const out = join(tmp, 'huge.safetensors');
    const f = await timed('forward', '--model', huge, '--ids', '1,2,3', '--out', out, '--backend', 'cpu');
    expect(f.code, f.err).toBe(1);
    expect(f.err).toContain(`rmas: ${limit}`);
    expect(f.ms).toBeLessThan(2000);
    expect(existsSync(out)).toBe(false);
    const p = await timed('plan-memory', '--agent', `planner=${huge}`, '--json');
    expect(p.code, p.err).toBe(1);
    expect(p.err).toContain(`rmas: ${limit}`);
    expect(p.out).toBe('');
    expect(p.ms).toBeLessThan(2000);
  });

  it('rms_norm_eps -1 is refused (it wrote all-NaN states)', async () => {
    const dir = copyWith('eps', { rms_norm_eps: -1 });
    const f = await rmas('forward', '--model', dir, '--ids', '1,2,3', '--out', join(tmp, 'eps.safetensors'), '--backend', 'cpu');
    expect(f.code).toBe(1);
    expect(f.err).toContain(`rmas: InvalidModelConfig: ${dir}/config.json: 'rms_norm_eps' must be a positive number below 1, got -1`);
    const p = await rmas('plan-memory', '--agent', `planner=${dir}`);
    expect([p.code, p.err.includes("'rms_norm_eps' must be a positive number below 1, got -1")]).toEqual([1, true]);
  });

  it('more layers than the checkpoint holds is refused naming both counts, before a weight is read', async () => {
    const dir = copyWith('three', { num_hidden_layers: 3 });
    const f = await rmas('forward', '--model', dir, '--ids', '1,2,3', '--out', join(tmp, 'three.safetensors'), '--backend', 'cpu');
    expect(f.code).toBe(1);
    expect(f.err).toContain(
      'InvalidModelConfig: ' +
        `${dir}/model.safetensors: the config says num_hidden_layers 3 (block_count in GGUF), but the checkpoint holds 2 layer(s) ` +
        '(model.layers.2.input_layernorm.weight is missing); set num_hidden_layers to 2',
    );
    expect(f.err).not.toMatch(/^model: /m); // refused before the weights were loaded
  });
});

describe('the context (max_position_embeddings 512)', () => {
  it('generate --max_new_tokens 1000000 says up front where it stops, and stops there', async () => {
    const g = await timed('generate', '--model', DIR, '--prompt', 'Hello, w', '--greedy', '--max_new_tokens', '1000000', '--json',
      '--backend', 'cpu');
    expect(g.code, g.err).toBe(0);
    const prompt = Number(/prompt: (\d+) tokens/.exec(g.err)![1]);
    expect(prompt).toBe(7);
    const fits = 512 - prompt + 1;
    expect(g.err).toContain(`note: --max_new_tokens 1000000 runs past the model's context (max_position_embeddings 512): ` +
      `the ${prompt}-token prompt leaves room for ${fits} new tokens; generation stops there\n`);
    // the note comes before the first token
    expect(g.err.indexOf('note: --max_new_tokens')).toBeLessThan(g.err.indexOf('prompt: 7 tokens'));
    const j = JSON.parse(g.out) as { tokens: number; stopped_by: string };
    expect([j.tokens, j.stopped_by]).toEqual([fits, 'length']);
    expect(g.ms).toBeLessThan(30_000);
    // within the context nothing is said
    const short = await rmas('generate', '--model', DIR, '--prompt', 'Hello, w', '--greedy', '--max_new_tokens', '4', '--backend', 'cpu');
    expect(short.err).not.toContain('note:');
  });

  it('a prompt longer than the context is ContextTooLong before any forward pass (generate and forward)', async () => {
    // 4500 characters: far over 512 tokens of the tiny vocabulary
    const prompt = 'The quick brown fox jumps over the lazy dog. '.repeat(100);
    const g = await timed('generate', '--model', DIR, '--prompt', prompt, '--greedy', '--backend', 'cpu');
    expect(g.code).toBe(1);
    expect(g.err).toMatch(
      /rmas: ContextTooLong: --prompt is (\d+) tokens, longer than the model's context of 512 positions \(max_position_embeddings\); shorten it/,
    );
    expect(Number(/--prompt is (\d+) tokens/.exec(g.err)![1])).toBeGreaterThan(512);
    expect(g.ms).toBeLessThan(5000);
    expect(g.err).not.toContain('prompt: '); // nothing generated
    const ids = Array.from({ length: 513 }, (_, i) => 3 + (i % 400)).join(',');
    const f = await rmas('forward', '--model', DIR, '--ids', ids, '--out', join(tmp, 'long.safetensors'), '--backend', 'cpu');
    expect(f.code).toBe(1);
    expect(f.err).toContain("rmas: ContextTooLong: --ids is 513 tokens, longer than the model's context of 512 positions");
    expect(existsSync(join(tmp, 'long.safetensors'))).toBe(false);
  });
});

describe('rmas forward --out', () => {
  it('refuses an existing file as convert does, and leaves it as it was', async () => {
    const out = join(tmp, 'existing.safetensors');
    writeFileSync(out, 'keep me');
    const f = await rmas('forward', '--model', DIR, '--ids', '1,2,3', '--out', out, '--backend', 'cpu');
    expect(f.code).toBe(1);
    expect(f.err).toContain(`rmas: InvalidArgument: --out ${out} exists; name a new file (nothing was changed)`);
    expect(readFileSync(out, 'utf8')).toBe('keep me');
    // a new name is written
    const fresh = join(tmp, 'fresh.safetensors');
    const ok = await rmas('forward', '--model', DIR, '--ids', '1,2,3', '--out', fresh, '--backend', 'cpu');
    expect(ok.code, ok.err).toBe(0);
    expect(readFileSync(fresh).length).toBeGreaterThan(3 * 4 * 48);
  });
});
