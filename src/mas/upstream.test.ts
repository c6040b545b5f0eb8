/**
 * Upstream layouts: inner/outer resolution rules on hand-made folders, link file round trips (.pt and
 * .safetensors, bf16 and f32), manifests, adapterTaskFor and the HF cache lookup.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundBf16 } from '../formats/dtype';
import { writeTorchStateDict } from '../formats/torch';
import { CpuBackend } from '../tensor/cpu';
import { InnerLink, OuterLink } from './links';
import {
  adapterTaskFor, linkFileBytes, outerManifests, parseLinkBytes, readLinkFile,
  resolveOuterFolder, resolveRoleFiles, resolveRoleFolder, writeLinkFile,
} from './upstream';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rmas-upstream-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

let nDir = 0;
/** A folder holding `files` (name → text; '' for an empty stand-in). */
async function folder(files: Record<string, string>): Promise<string> {
  const dir = join(root, `d${++nDir}`);
  await mkdir(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}
const role = (extra: Record<string, string>) => folder({ 'config.json': '{}', 'model.safetensors': '', ...extra });
const base = (p: string | null) => (p === null ? null : p.slice(p.lastIndexOf('/') + 1));

describe('adapterTaskFor', () => {
  it.each([
    ['code', 'code'],
    ['mbppplus', 'code'],
    ['MBPPPlus', 'code'],
    ['evalplus/mbppplus', 'code'],
    ['livecodebench', 'code'],
    [' lcb ', 'code'],
    ['math', 'math'],
    ['math500', 'math'],
    ['gpqa', 'math'],
    ['medqa', 'math'],
    ['aime25', 'math'],
    ['', 'math'],
  ])('%s → %s', (name, want) => expect(adapterTaskFor(name)).toBe(want));
});

describe('resolveRoleFolder', () => {
  it('innerlink_config.json wins over adapter(task).pt', async () => {
    const dir = await role({
      'adapter(math).pt': '', 'adapter(code).pt': '', 'adapter_v2_math.pt': '',
      'innerlink_config.json': JSON.stringify({ tasks: { math: { 'adapter.pt': 'adapter_v2_math.pt' } } }),
    });
    const r = await resolveRoleFolder('planner', dir, 'math');
    expect(base(r.innerPath)).toBe('adapter_v2_math.pt');
    expect(r.innerType).toBe('ln_res_adapter');
    // task not in the config → the adapter(task).pt rule
    expect(base((await resolveRoleFolder('planner', dir, 'code')).innerPath)).toBe('adapter(code).pt');
  });

  it('a config-named file that is missing is not replaced by a fallback', async () => {
    const dir = await role({ 'adapter.pt': '', 'innerlink_config.json': JSON.stringify({ tasks: { math: { 'adapter.pt': 'gone.pt' } } }) });
    expect((await resolveRoleFolder('p', dir, 'math')).innerPath).toBeNull();
    await expect(resolveRoleFolder('p', dir, 'math', { requireInner: true })).rejects.toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringContaining('looked for gone.pt, gone.safetensors'),
    });
  });

  it('adapter(task).pt, then adapter.pt, then .safetensors twins; adapter_type from adapter_config.json', async () => {
    const dir = await role({ 'adapter(code).pt': '', 'adapter.pt': '', 'adapter_config.json': '{"adapter_type": "res_adapter"}' });
    expect(base((await resolveRoleFolder('r', dir, 'code')).innerPath)).toBe('adapter(code).pt');
    const r = await resolveRoleFolder('r', dir, 'math');
    expect(base(r.innerPath)).toBe('adapter.pt');
    expect(r.innerType).toBe('res_adapter');
    const st = await role({ 'adapter(math).safetensors': '' });
    expect(base((await resolveRoleFolder('r', st, 'math')).innerPath)).toBe('adapter(math).safetensors');
  });

  it('task null → adapter.pt, else the only adapter(*) file', async () => {
    expect(base((await resolveRoleFolder('r', await role({ 'adapter.pt': '', 'adapter(math).pt': '' }), null)).innerPath)).toBe(
      'adapter.pt',
    );
    expect(base((await resolveRoleFolder('r', await role({ 'adapter(math).pt': '' }), null)).innerPath)).toBe('adapter(math).pt');
    expect((await resolveRoleFolder('r', await role({ 'adapter(math).pt': '', 'adapter(code).pt': '' }), null)).innerPath).toBeNull();
  });

  it('missing config.json or inner file → MissingCheckpoint with what to do', async () => {
    const noConfig = await folder({ 'adapter.pt': '' });
    await expect(resolveRoleFolder('critic', noConfig, 'math')).rejects.toMatchObject({
      name: 'MissingCheckpoint', message: expect.stringContaining(`role critic: ${noConfig} has no config.json`),
    });
    const noInner = await role({});
    expect((await resolveRoleFolder('critic', noInner, 'math')).innerPath).toBeNull();
    await expect(resolveRoleFolder('critic', noInner, 'math', { requireInner: true })).rejects.toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringContaining('adapter(math).pt, adapter(math).safetensors, adapter.pt, adapter.safetensors'),
    });
    await expect(resolveRoleFolder('critic', join(root, 'nope'), 'math')).rejects.toMatchObject({ name: 'MissingCheckpoint' });
  });

  it('corrupt manifests → CorruptCheckpoint naming the file', async () => {
    const dir = await role({ 'innerlink_config.json': '{"tasks": ' });
    await expect(resolveRoleFolder('r', dir, 'math')).rejects.toMatchObject({
      name: 'CorruptCheckpoint', message: expect.stringContaining(`${dir}/innerlink_config.json is not valid JSON`),
    });
    await expect(resolveRoleFolder('r', await role({ 'adapter_config.json': '[1]' }), 'math')).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
    });
  });

  it('resolveRoleFiles lists every name tried, and probes an unlisted folder in that order up to the first hit', async () => {
    const none = { has: async () => false, manifest: async () => null };
    expect(await resolveRoleFiles(none, 'code')).toEqual({
      inner: null,
      innerType: 'ln_res_adapter',
      tried: ['adapter(code).pt', 'adapter(code).safetensors', 'adapter.pt', 'adapter.safetensors'],
    });
    const asked: string[] = [];
    const url = { has: async (n: string) => (asked.push(n), n === 'adapter.safetensors'), manifest: async () => null };
    expect((await resolveRoleFiles(url, null)).inner).toBe('adapter.safetensors');
    expect(asked).toEqual(['adapter.pt', 'adapter.safetensors']); // no listing: no adapter(*) fallback
  });
});

const entry = (k: string, f: string, i = 4, o = 8) => ({
  legacy_key: k,
  filename: f,
  adapter_type: 'outer_ln_res_adapter',
  in_dim: i,
  out_dim: o,
});

describe('resolveOuterFolder', () => {
  it('task-scoped outerlink_config.json picks the task', async () => {
    const dir = await folder({
      'A(math).pt': '', 'A(code).pt': '', 'B(code).safetensors': '',
      'outerlink_config.json': JSON.stringify({ format_version: 1, tasks: {
        math: { adapters: [entry('outer_12', 'A(math).pt')] },
        code: { adapters: [entry('outer_12', 'A(code).pt', 16, 32), entry('outer_23', 'B(code).pt')] },
      } }),
    });
    const m = await resolveOuterFolder(dir, 'code', ['outer_12', 'outer_23']);
    expect([...m.keys()]).toEqual(['outer_12', 'outer_23']);
    expect(m.get('outer_12')).toEqual({ key: 'outer_12', path: `${dir}/A(code).pt`, type: 'outer_ln_res_adapter', inDim: 16, outDim: 32 });
    expect(m.get('outer_23')!.path).toBe(`${dir}/B(code).safetensors`); // our export's twin
    expect(base((await resolveOuterFolder(dir, 'math', ['outer_12'])).get('outer_12')!.path)).toBe('A(math).pt');
    await expect(resolveOuterFolder(dir, 'math', ['outer_23'])).rejects.toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringContaining("'outer_23'"),
    });
    await expect(resolveOuterFolder(dir, null, ['outer_12'])).rejects.toMatchObject({
      name: 'InvalidArgument',
      message: expect.stringContaining('task-scoped (math, code)'),
    });
  });

  it('plain outerlink_config.json ignores the task and returns only the keys asked for', async () => {
    const dir = await folder({
      'rt.pt': '',
      'tr.pt': '',
      'outerlink_config.json': JSON.stringify({
        format_version: 1,
        paradigm: 'deliberation',
        adapters: [entry('outer_rt', 'rt.pt'), entry('outer_tr', 'tr.pt')],
      }),
    });
    const m = await resolveOuterFolder(dir, null, ['outer_tr']);
    expect([...m.keys()]).toEqual(['outer_tr']);
    expect(base(m.get('outer_tr')!.path)).toBe('tr.pt');
    expect((await resolveOuterFolder(dir, 'math', ['outer_rt'])).get('outer_rt')!.inDim).toBe(4);
  });

  it('falls back to outer_adapter_config(task).json / outer_adapter_config.json and ${key}.pt', async () => {
    const dir = await folder({
      'outer_12.pt': '', 'outer_31.safetensors': '',
      'outer_adapter_config(code).json': JSON.stringify({ outer_12_type: 'outer_res_adapter', outer_12_in_dim: 48, outer_12_out_dim: 64 }),
      'outer_adapter_config.json': JSON.stringify({ outer_12_type: 'outer_ln_adapter', outer_12_in_dim: 2, outer_12_out_dim: 3 }),
    });
    const code = await resolveOuterFolder(dir, 'code', ['outer_12', 'outer_31']);
    expect(code.get('outer_12')).toEqual({ key: 'outer_12', path: `${dir}/outer_12.pt`, type: 'outer_res_adapter', inDim: 48, outDim: 64 });
    expect(code.get('outer_31')).toEqual({
      key: 'outer_31',
      path: `${dir}/outer_31.safetensors`,
      type: 'outer_ln_res_adapter',
      inDim: undefined,
      outDim: undefined,
    });
    expect((await resolveOuterFolder(dir, 'math', ['outer_12'])).get('outer_12')!.type).toBe('outer_ln_adapter');
    await expect(resolveOuterFolder(dir, 'math', ['outer_23'])).rejects.toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringContaining(
        `${dir}: no outerlink_config.json and no file for link 'outer_23' (looked for outer_23.pt, outer_23.safetensors)`,
      ),
    });
  });

  it('a listed file that is missing, or a corrupt manifest, is named', async () => {
    const dir = await folder({ 'outerlink_config.json': JSON.stringify({ adapters: [entry('outer_el', 'Expert-Learner-Outerlink.pt')] }) });
    await expect(resolveOuterFolder(dir, null, ['outer_el'])).rejects.toMatchObject({
      name: 'MissingCheckpoint',
      message: expect.stringContaining(
        "link 'outer_el' file is missing (looked for Expert-Learner-Outerlink.pt, Expert-Learner-Outerlink.safetensors)",
      ),
    });
    const bad = await folder({ 'outerlink_config.json': '{"adapters": [' });
    await expect(resolveOuterFolder(bad, null, ['outer_el'])).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: expect.stringContaining('outerlink_config.json'),
    });
    const noList = await folder({ 'outerlink_config.json': '{"adapters": {}}' });
    await expect(resolveOuterFolder(noList, null, ['outer_el'])).rejects.toMatchObject({ name: 'CorruptCheckpoint' });
  });
});

describe('link files', () => {
  const cpu = new CpuBackend('f32');

  it.each([
    ['pt', 'bf16'],
    ['pt', 'f32'],
    ['safetensors', 'bf16'],
    ['safetensors', 'f32'],
  ] as const)('%s %s round trip', async (fmt, dtype) => {
    const link = OuterLink.create(cpu, 6, 5, { seed: 7 });
    const want = await link.stateDict();
    const path = join(root, `rt-${dtype}.${fmt}`);
    await writeLinkFile(link, path, { dtype });
    const got = await readLinkFile(path);
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [k, t] of want) {
      expect(got.get(k)!.shape).toEqual(t.shape);
      const exp = dtype === 'bf16' ? Float32Array.from(t.data, roundBf16) : t.data;
      expect(Float32Array.from(got.get(k)!.data)).toEqual(exp);
    }
    if (dtype === 'bf16') expect(got.get('proj1.weight')!.data).not.toEqual(want.get('proj1.weight')!.data); // rounding did happen
    expect(OuterLink.fromStateDict(cpu, got, { dIn: 6, dOut: 5 }).hidden).toBe(10);
    expect((await readdir(root)).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('InnerLink.fromStateDict accepts a written .pt; bf16 file size = 2 bytes × params + overhead', async () => {
    const link = InnerLink.create(cpu, 8, { seed: 3 });
    const path = join(root, 'inner.pt');
    await writeLinkFile(link, path);
    const back = InnerLink.fromStateDict(cpu, await readLinkFile(path), { d: 8 });
    expect(back.numParams).toBe(2 * 64 + 6 * 8);
    const bytes = linkFileBytes(await link.stateDict(), 'safetensors', 'bf16');
    expect(bytes.length - 8 - Number(new DataView(bytes.buffer).getBigUint64(0, true))).toBe(2 * 176);
  });

  it('f16 tensors are widened exactly; bad bytes and missing files are named errors', async () => {
    const pt = writeTorchStateDict(
      new Map([['x', { dtype: 'f16' as const, shape: [2], bytes: new Uint8Array([0x00, 0x3c, 0x00, 0xc2]) }]]),
    );
    expect(Array.from(parseLinkBytes(pt, 'x.pt').get('x')!.data)).toEqual([1, -3]);
    expect(() => parseLinkBytes(new Uint8Array([1, 2, 3]), 'bad.pt')).toThrow(/bad\.pt/);
    expect(() => parseLinkBytes(pt.slice(0, pt.length - 30), 'cut.pt')).toThrowError(
      expect.objectContaining({ name: 'CorruptCheckpoint' }),
    );
    await expect(readLinkFile(join(root, 'absent.pt'))).rejects.toMatchObject({ name: 'MissingCheckpoint' });
    await expect(writeLinkFile(InnerLink.create(cpu, 2), join(root, 'x.bin'))).rejects.toMatchObject({ name: 'InvalidArgument' });
  });

  it('outerManifests writes both manifests', () => {
    const m = outerManifests('chain', [{ key: 'outer_12', filename: 'outer_12.pt', type: 'outer_ln_res_adapter', inDim: 48, outDim: 64 }]);
    expect(m.outerlinkConfig).toEqual({
      format_version: 1, paradigm: 'chain', legacy_config_filename: 'outer_adapter_config.json',
      adapters: [{ legacy_key: 'outer_12', filename: 'outer_12.pt', adapter_type: 'outer_ln_res_adapter', in_dim: 48, out_dim: 64 }],
    });
    expect(m.outerAdapterConfig).toEqual({ outer_12_type: 'outer_ln_res_adapter', outer_12_in_dim: 48, outer_12_out_dim: 64 });
  });
});
