/**
 * Tiny upstream-layout systems (scripts/tiny-system/tiny-mas.ts): every style resolves through the upstream resolvers,
 * each link's sizes equal the hidden sizes in its agents' config.json, and the bytes are deterministic.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/tensor/cpu.ts';
import { parseDecoderConfig } from '../src/model/config.ts';
import { InnerLink, OuterLink } from '../src/mas/links.ts';
import { type AdapterTask, readLinkFile, resolveOuterFolder, resolveRoleFolder } from '../src/mas/upstream.ts';
import { TINY_MAS_LINKS, TINY_MAS_ROLES, TINY_STYLES, type TinyStyle, buildTinySystem } from '../scripts/tiny-system/tiny-mas.ts';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rmas-tiny-mas-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const cpu = new CpuBackend('f32');
const hidden = async (dir: string) => parseDecoderConfig(await readFile(join(dir, 'config.json'), 'utf8')).hidden;

/** sha256 of every file under each folder of a system, by relative name. */
async function digest(sys: { roles: Record<string, string>; outer: string }): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const dir of [...Object.values(sys.roles), sys.outer]) {
    for (const f of (await readdir(dir)).sort()) {
      out[`${dir.slice(dir.lastIndexOf('/') + 1)}/${f}`] = createHash('sha256').update(await readFile(join(dir, f))).digest('hex');
    }
  }
  return out;
}

it('the roles table matches the brief', () => {
  expect(TINY_MAS_ROLES.sequential_light).toEqual({ planner: 'qwen3-tiny', critic: 'llama-tiny', solver: 'qwen2-tiny' });
  expect(TINY_MAS_ROLES.sequential_scaled).toEqual({ planner: 'gemma3-tiny', critic: 'llama-tiny', solver: 'qwen3_5-tied-tiny' });
  expect(TINY_MAS_ROLES.mixture).toEqual({
    math: 'qwen2-tiny',
    code: 'qwen2-tiny',
    science: 'mistral-tiny',
    summarizer: 'qwen3_5-tied-tiny',
  });
  expect(TINY_MAS_ROLES.distillation).toEqual({ expert: 'qwen3_5-tiny', learner: 'qwen3_5-tied-tiny' });
  expect(TINY_MAS_ROLES.deliberation).toEqual({ reflector: 'qwen3_5-tied-tiny', toolcaller: 'qwen3_5-tied-tiny' });
  expect(TINY_MAS_LINKS.mixture.map((l) => l.key)).toEqual(['outer_1s', 'outer_2s', 'outer_3s', 'outer_s1', 'outer_s2', 'outer_s3']);
});

const CASES: [TinyStyle, (AdapterTask | null)[]][] = TINY_STYLES.map((s) => [s, s.startsWith('sequential') ? ['math', 'code'] : [null]]);

describe.each(CASES)('%s', (style, tasks) => {
  it('resolves every link, with sizes equal to the agents\' hidden sizes', async () => {
    const sys = await buildTinySystem(style, join(root, 'a'));
    expect(Object.keys(sys.roles)).toEqual(Object.keys(TINY_MAS_ROLES[style]));
    const dims: Record<string, number> = {};
    const seen = new Set<string>();
    for (const task of tasks) {
      for (const [role, dir] of Object.entries(sys.roles)) {
        const r = await resolveRoleFolder(role, dir, task, { requireInner: true });
        expect(r.innerType).toBe('ln_res_adapter');
        expect(r.innerPath).toBe(join(dir, task ? `adapter(${task}).pt` : 'adapter.pt'));
        dims[role] = await hidden(dir);
        const inner = InnerLink.fromStateDict(cpu, await readLinkFile(r.innerPath!), { d: dims[role] });
        expect(inner.d).toBe(dims[role]);
        seen.add(createHash('sha256').update(await readFile(r.innerPath!)).digest('hex'));
      }
      const keys = TINY_MAS_LINKS[style].map((l) => l.key);
      const outer = await resolveOuterFolder(sys.outer, task, keys);
      expect([...outer.keys()]).toEqual(keys);
      for (const spec of TINY_MAS_LINKS[style]) {
        const f = outer.get(spec.key)!;
        expect([f.inDim, f.outDim, f.type]).toEqual([dims[spec.from], dims[spec.to], 'outer_ln_res_adapter']);
        if (task) expect(f.path).toBe(join(sys.outer, `${spec.stem}(${task}).pt`));
        const l = OuterLink.fromStateDict(cpu, await readLinkFile(f.path), { dIn: dims[spec.from], dOut: dims[spec.to] });
        expect([l.dIn, l.dOut]).toEqual([dims[spec.from], dims[spec.to]]);
      }
    }
    // every inner link file differs (math ≠ code, role ≠ role)
    expect(seen.size).toBe(tasks.length * Object.keys(sys.roles).length);
  });

  it('building twice gives identical bytes; another seed changes only the links', async () => {
    const a = await digest(await buildTinySystem(style, join(root, 'b1'), { seed: 5 }));
    const b = await digest(await buildTinySystem(style, join(root, 'b2'), { seed: 5 }));
    expect(b).toEqual(a);
    const c = await digest(await buildTinySystem(style, join(root, 'b3'), { seed: 6 }));
    const changed = Object.keys(a).filter((k) => a[k] !== c[k]);
    expect(changed.length).toBeGreaterThan(0);
    expect(changed.every((k) => /\.pt$/.test(k))).toBe(true);
  });
});

it('the model files are copies of models/tiny', async () => {
  const sys = await buildTinySystem('distillation', join(root, 'c'));
  for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']) {
    const [got, want] = await Promise.all([
      readFile(join(sys.roles.expert, f)),
      readFile(join(import.meta.dirname, '../models/tiny/qwen3_5-tiny', f)),
    ]);
    expect(got.equals(want), f).toBe(true);
  }
  expect((await readdir(sys.roles.learner)).sort()).toEqual([
    'adapter.pt',
    'adapter_config.json',
    'config.json',
    'generation_config.json',
    'model.safetensors',
    'tokenizer.json',
    'tokenizer_config.json',
  ]);
});

it('untasked sequential (training layout) and safetensors links resolve too', async () => {
  const sys = await buildTinySystem('sequential_light', join(root, 'd'), { taskScoped: false, linkFormat: 'safetensors' });
  const r = await resolveRoleFolder('critic', sys.roles.critic, 'code', { requireInner: true });
  expect(r.innerPath).toBe(join(sys.roles.critic, 'adapter.safetensors'));
  expect(InnerLink.fromStateDict(cpu, await readLinkFile(r.innerPath!)).d).toBe(64);
  const outer = await resolveOuterFolder(sys.outer, null, ['outer_31']);
  expect(outer.get('outer_31')).toEqual({
    key: 'outer_31',
    path: join(sys.outer, 'outer_31.safetensors'),
    type: 'outer_ln_res_adapter',
    inDim: 32,
    outDim: 48,
  });
  expect((await readdir(sys.outer)).sort()).toEqual(
    ['outer_12.safetensors', 'outer_23.safetensors', 'outer_31.safetensors', 'outer_adapter_config.json', 'outerlink_config.json'],
  );
});
