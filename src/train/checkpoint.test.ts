/**
 * Checkpoints: save → load into freshly initialised links restores weights, AdamW moments and t exactly
 * (and a further AdamW step agrees bit for bit), trainer state and args round trip, the .pt/.safetensors
 * files read back through upstream's readLinkFile, a crash mid-save leaves the previous checkpoint
 * intact, and damaged checkpoints fail with named errors that name the file. Saves into a save_dir root
 * keep its checkpoint-<step> folders and other files, and a crash before each of the save's mutating
 * calls (memory and node stores) loads as exactly the old or exactly the new checkpoint; listing and
 * picking the checkpoint to resume from.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdamW } from '../autograd/ops/optim';
import { CorruptCheckpoint, MissingCheckpoint, ShapeMismatch } from '../errors';
import { roundBf16 } from '../formats/dtype';
import { writeSafetensors } from '../formats/safetensors';
import { InnerLink, OuterLink } from '../mas/links';
import { readLinkFile } from '../mas/upstream';
import { CpuBackend } from '../tensor/cpu';
import { Rng } from '../util/rng';
import {
  type CheckpointContent, type TrainerState, latestCheckpoint, listCheckpoints, loadCheckpoint, pruneCheckpoints, saveCheckpoint,
} from './checkpoint';
import { type FileStore, memoryStore, nodeStore } from './file-store';

const cpu = new CpuBackend('f32');
let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rmas-ckpt-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

type L = InnerLink | OuterLink;
const outerLinks = (seed: number) =>
  new Map<string, L>([
    ['outer_12', OuterLink.create(cpu, 6, 5, { seed, name: 'outer_12' })],
    ['outer_23', OuterLink.create(cpu, 5, 7, { seed: seed + 1, name: 'outer_23' })],
    ['outer_31', OuterLink.create(cpu, 7, 6, { seed: seed + 2, name: 'outer_31', type: 'outer_linear_res_adapter' })],
  ]);

/** Two AdamW steps on seeded gradients, so that weights, m and v all differ from their init. */
async function train(links: ReadonlyMap<string, L>, steps: number, seed: number): Promise<AdamW[]> {
  const rng = new Rng(seed);
  const opts = [...links.values()].map((l) => new AdamW([l.params], { weightDecay: 0.01 }));
  for (let s = 0; s < steps; s++) {
    for (const o of opts) {
      o.params[0].import(new Map(o.params[0].entries.map((e) => [e.name, rng.normals(e.numel)])), { part: 'grad' });
      o.step(1e-2).dispose();
    }
  }
  return opts;
}

const snapshot = async (links: ReadonlyMap<string, L>) => {
  const out: Record<string, Float32Array[]> = {};
  for (const [k, l] of links)
    out[k] = await Promise.all(
      (['data', 'm', 'v'] as const).map(async (p) => Float32Array.from([...(await l.params.export(p)).values()].flatMap((a) => [...a]))),
    );
  return out;
};

const state = (rng: Rng): TrainerState => ({
  step: 2,
  epoch: 1,
  sampleCursor: 3,
  order: [4, 0, 2, 1, 3],
  rng: rng.state(),
  skipped: { sequence_too_long: 1, nan_loss: 0 },
  tokensSeen: 1234,
});

function content(links: ReadonlyMap<string, L>, t: number, rng: Rng): CheckpointContent {
  return {
    kind: 'outer',
    links,
    optimizerT: t,
    state: state(rng),
    args: { outer_lr: 5e-4, max_steps: 20, style: 'sequential_light' },
    manifests: {
      'outerlink_config.json': { format_version: 1, paradigm: 'sequential', adapters: [] },
      'outer_adapter_config.json': { outer_12_type: 'outer_ln_res_adapter' },
    },
  };
}

describe('checkpoint round trip', () => {
  it('restores weights, m, v and t exactly; the next AdamW step agrees bit for bit', async () => {
    const store = nodeStore(join(root, 'rt'));
    const a = outerLinks(1);
    const optsA = await train(a, 2, 99);
    const rng = new Rng(42);
    rng.normals(3);
    const c = content(a, optsA[0].t, rng);
    await saveCheckpoint(store, 'run/checkpoint-2', c);

    const b = outerLinks(500); // different init
    const before = await snapshot(b);
    expect(before.outer_12[0]).not.toEqual((await snapshot(a)).outer_12[0]);
    const got = await loadCheckpoint(store, 'run/checkpoint-2', b);
    expect(got.optimizerT).toBe(2);
    const sa = await snapshot(a);
    const sb = await snapshot(b);
    for (const k of a.keys()) for (let i = 0; i < 3; i++) expect(sb[k][i]).toEqual(sa[k][i]);
    expect(sa.outer_12[1].some((x) => x !== 0)).toBe(true); // m really was non-zero

    expect(got.state).toEqual(c.state);
    expect(got.state.rng).toEqual({ kind: 'mulberry32', s: (42 + 6 * 0x6d2b79f5) >>> 0 });
    expect(Rng.fromState(got.state.rng).next()).toBe(rng.next());
    expect(got.args).toEqual({ outer_lr: 5e-4, max_steps: 20, style: 'sequential_light' });

    // resume: restore t, take one more step on both with the same gradients
    const optsB = [...b.values()].map((l) => Object.assign(new AdamW([l.params], { weightDecay: 0.01 }), { t: got.optimizerT }));
    for (const opts of [optsA, optsB]) {
      const r = new Rng(7); // the same gradients for both runs
      for (const o of opts) {
        o.params[0].import(new Map(o.params[0].entries.map((e) => [e.name, r.normals(e.numel)])), { part: 'grad' });
        o.step(1e-2).dispose();
      }
    }
    const after = [await snapshot(a), await snapshot(b)];
    for (const k of a.keys()) expect(after[1][k][0]).toEqual(after[0][k][0]);
    expect(optsB[0].t).toBe(3);

    const files = await readdir(join(root, 'rt/run/checkpoint-2'));
    expect(files.sort()).toEqual([
      'optimizer.safetensors', 'outer_12.pt', 'outer_12.safetensors', 'outer_23.pt', 'outer_23.safetensors', 'outer_31.pt',
      'outer_31.safetensors', 'outer_adapter_config.json', 'outerlink_config.json', 'train_args.json', 'trainer_state.json',
    ]);
    expect(await readdir(join(root, 'rt/run'))).toEqual(['checkpoint-2']);
  });

  it('writes upstream-readable .pt (f32 or bf16) and f32 .safetensors under upstream keys', async () => {
    const store = nodeStore(join(root, 'up'));
    const inner = InnerLink.create(cpu, 8, { seed: 3, name: 'adapter' });
    const links = new Map<string, L>([['adapter', inner]]);
    const c: CheckpointContent = {
      ...content(links, 0, new Rng(1)),
      kind: 'inner',
      manifests: { 'adapter_config.json': { adapter_type: 'ln_res_adapter' } },
    };
    const want = await inner.stateDict();
    const keys = [
      'pre_ln.weight',
      'pre_ln.bias',
      'proj1.weight',
      'proj1.bias',
      'proj2.weight',
      'proj2.bias',
      'post_ln.weight',
      'post_ln.bias',
    ];
    await saveCheckpoint(store, 'f32', c);
    await saveCheckpoint(store, 'bf16', c, { ptDtype: 'bf16' });
    for (const [file, exact] of [
      ['f32/adapter.pt', true],
      ['f32/adapter.safetensors', true],
      ['bf16/adapter.safetensors', true],
      ['bf16/adapter.pt', false],
    ] as const) {
      const sd = await readLinkFile(join(root, 'up', file));
      expect([...sd.keys()].sort(), file).toEqual([...keys].sort());
      for (const k of keys) {
        const w = want.get(k)!;
        expect(sd.get(k)!.shape).toEqual(w.shape);
        expect(Float32Array.from(sd.get(k)!.data)).toEqual(exact ? w.data : Float32Array.from(w.data, roundBf16));
      }
    }
    expect(JSON.parse(new TextDecoder().decode(await store.read('f32/adapter_config.json')))).toEqual({ adapter_type: 'ln_res_adapter' });
  });
});

/** A store that throws on its n-th write (a crash in the middle of a save). */
function crashingStore(inner: FileStore, n: number): FileStore {
  let writes = 0;
  return {
    ...inner,
    write: async (p, b) => {
      if (++writes === n) throw new Error(`simulated crash at write ${n}`);
      return inner.write(p, b);
    },
  };
}

describe('crash safety', () => {
  for (const n of [1, 4, 9]) {
    it(`a save that dies at write ${n} leaves the previous checkpoint loadable and unchanged`, async () => {
      const mem = memoryStore();
      const a = outerLinks(1);
      const optsA = await train(a, 1, 5);
      await saveCheckpoint(mem, 'ck', content(a, optsA[0].t, new Rng(3)));
      const saved = new Map(mem.files);
      const first = await snapshot(a);
      await train(a, 2, 6); // more progress, then a save that crashes
      await expect(saveCheckpoint(crashingStore(mem, n), 'ck', content(a, 3, new Rng(4)))).rejects.toThrow(/simulated crash/);
      const b = outerLinks(77);
      const got = await loadCheckpoint(mem, 'ck', b);
      expect(got.optimizerT).toBe(1);
      const sb = await snapshot(b);
      for (const k of a.keys()) for (let i = 0; i < 3; i++) expect(sb[k][i]).toEqual(first[k][i]);
      expect(mem.files).toEqual(saved); // the partial .tmp was cleared, ck byte-identical
    });
  }
});

describe('damaged checkpoints', () => {
  async function saved() {
    const mem = memoryStore();
    const a = outerLinks(1);
    await train(a, 1, 5);
    await saveCheckpoint(mem, 'ck', content(a, 1, new Rng(3)));
    return mem;
  }
  const f32 = (n: number) => new Uint8Array(new Float32Array(n).buffer);

  it('a link file lacking a tensor → CorruptCheckpoint naming the file; links untouched', async () => {
    const mem = await saved();
    const sd = await outerLinks(1).get('outer_23')!.stateDict();
    sd.delete('proj2.bias');
    mem.files.set(
      'ck/outer_23.safetensors',
      writeSafetensors([...sd].map(([k, v]) => [k, { dtype: 'F32', shape: v.shape, bytes: new Uint8Array(v.data.buffer) }] as const)),
    );
    const b = outerLinks(9);
    const before = await snapshot(b);
    const err = await loadCheckpoint(mem, 'ck', b).catch((e) => e);
    expect(err).toBeInstanceOf(CorruptCheckpoint);
    expect(err.message).toMatch(/ck\/outer_23\.safetensors: lacks proj2\.bias/);
    expect(await snapshot(b)).toEqual(before); // outer_12 was not loaded either
  });

  it('an odd-sized weight or moment → ShapeMismatch naming the file', async () => {
    const mem = await saved();
    const sd = await outerLinks(1).get('outer_12')!.stateDict();
    const t = sd.get('proj1.bias')!;
    sd.set('proj1.bias', { shape: [t.shape[0] + 1], data: new Float32Array(t.shape[0] + 1) });
    mem.files.set(
      'ck/outer_12.safetensors',
      writeSafetensors([...sd].map(([k, v]) => [k, { dtype: 'F32', shape: v.shape, bytes: new Uint8Array(v.data.buffer) }] as const)),
    );
    await expect(loadCheckpoint(mem, 'ck', outerLinks(9))).rejects.toThrow(ShapeMismatch);
    await expect(loadCheckpoint(mem, 'ck', outerLinks(9))).rejects.toThrow(
      /ck\/outer_12\.safetensors: 'proj1\.bias' has shape \[11\] but link outer_12 needs \[10\]/,
    );

    const mem2 = await saved();
    const links = outerLinks(1);
    const tensors = [...links].flatMap(([k, l]) =>
      (['m', 'v'] as const).map(
        (p) =>
          [
            `${k}.${p}`,
            {
              dtype: 'F32' as const,
              shape: [l.numParams - (k === 'outer_31' && p === 'v' ? 1 : 0)],
              bytes: f32(l.numParams - (k === 'outer_31' && p === 'v' ? 1 : 0)),
            },
          ] as const,
      ),
    );
    mem2.files.set('ck/optimizer.safetensors', writeSafetensors(tensors, { t: '1' }));
    await expect(loadCheckpoint(mem2, 'ck', outerLinks(9))).rejects.toThrow(
      /ck\/optimizer\.safetensors: 'outer_31\.v' has shape \[\d+\] but link outer_31 has \d+ parameters/,
    );
    mem2.files.set('ck/optimizer.safetensors', writeSafetensors(tensors.filter(([k]) => k !== 'outer_23.m'), { t: '1' }));
    await expect(loadCheckpoint(mem2, 'ck', outerLinks(9))).rejects.toThrow(/optimizer\.safetensors: lacks tensor 'outer_23\.m'/);
  });

  it('truncated files, other link sets and absent checkpoints are named errors', async () => {
    const mem = await saved();
    const good = mem.files.get('ck/outer_31.safetensors')!;
    mem.files.set('ck/outer_31.safetensors', good.slice(0, good.length - 4));
    await expect(loadCheckpoint(mem, 'ck', outerLinks(9))).rejects.toThrow(/ck\/outer_31\.safetensors.*truncated/);
    mem.files.set('ck/outer_31.safetensors', good);
    const two = new Map([...outerLinks(9)].slice(0, 2));
    await expect(loadCheckpoint(mem, 'ck', two)).rejects.toThrow(
      /holds links outer_12, outer_23, outer_31 but this run trains outer_12, outer_23/,
    );
    mem.files.set(
      'ck/trainer_state.json',
      new TextEncoder().encode('{"format_version":1,"links":["outer_12","outer_23","outer_31"],"state":{"step":-1}}'),
    );
    await expect(loadCheckpoint(mem, 'ck', outerLinks(9))).rejects.toThrow(/trainer_state\.json: .*field step = -1/);
    await expect(loadCheckpoint(mem, 'nothing-here', outerLinks(9))).rejects.toThrow(MissingCheckpoint);
  });
});

/** The store, except that its n-th mutating call (write, remove, rename) throws instead of running. */
function crashAt(inner: FileStore, n: number): FileStore {
  let calls = 0;
  const tick = () => {
    if (++calls === n) throw new Error(`simulated crash at call ${n}`);
  };
  return {
    ...inner,
    write: async (p, b) => (tick(), inner.write(p, b)),
    remove: async (p) => (tick(), inner.remove(p)),
    rename: async (f, t) => (tick(), inner.rename(f, t)),
  };
}

const OLD_FILES = [
  'optimizer.safetensors', 'outer_12.pt', 'outer_12.safetensors', 'outer_23.pt', 'outer_23.safetensors', 'outer_31.pt',
  'outer_31.safetensors', 'outer_adapter_config.json', 'outerlink_config.json', 'train_args.json', 'trainer_state.json',
];
const NEW_FILES = [...OLD_FILES.filter((f) => f !== 'outer_adapter_config.json'), 'extra.json'].sort();
const SIBLINGS = ['checkpoint-1', 'model.safetensors', 'notes'];
/** Each store kind, made holding `files` (node: written with plain fs calls, no fsync, to keep the tests fast). */
const stores = [
  { name: 'memory', make: async (files = new Map<string, Uint8Array>()) => seedMemory(files) },
  {
    name: 'node',
    async make(files = new Map<string, Uint8Array>()): Promise<FileStore> {
      const dir = await mkdtemp(join(root, 'st-'));
      for (const [k, b] of files) {
        await mkdir(dirname(join(dir, k)), { recursive: true });
        await writeFile(join(dir, k), b);
      }
      return nodeStore(dir);
    },
  },
];
function seedMemory(files: Map<string, Uint8Array>): FileStore {
  const mem = memoryStore();
  for (const [k, b] of files) mem.files.set(k, b.slice());
  return mem;
}

/** A save_dir whose root holds a checkpoint (t = 1, step 2) next to a checkpoint-1 folder, a model file and notes/. */
async function saveDirTemplate() {
  const mem = memoryStore();
  const a = outerLinks(1);
  await train(a, 1, 5);
  await saveCheckpoint(mem, 'checkpoint-1', content(a, 1, new Rng(2)));
  await saveCheckpoint(mem, '', content(a, 1, new Rng(3)));
  mem.files.set('model.safetensors', new Uint8Array([1, 2, 3]));
  mem.files.set('notes/readme.txt', new Uint8Array([4]));
  const old = await snapshot(a);
  await train(a, 2, 6);
  const newer: CheckpointContent = { ...content(a, 3, new Rng(4)), state: { ...state(new Rng(4)), step: 5 } };
  newer.manifests = { 'outerlink_config.json': { format_version: 1, paradigm: 'sequential', adapters: [] }, 'extra.json': { n: 1 } };
  return { mem, a, old, fresh: await snapshot(a), newer };
}

describe('checkpoint at the save_dir root', () => {
  for (const { name, make } of stores) {
    it(`${name}: a root save keeps checkpoint folders and other files, and removes stale checkpoint files`, async () => {
      const t = await saveDirTemplate();
      const store = await make(t.mem.files);
      expect(await store.list('')).toEqual([...SIBLINGS, ...OLD_FILES].sort());
      await saveCheckpoint(store, '.', t.newer);
      expect(await store.list('')).toEqual([...SIBLINGS, ...NEW_FILES].sort());
      expect(Array.from(await store.read('model.safetensors'))).toEqual([1, 2, 3]);
      expect(Array.from(await store.read('notes/readme.txt'))).toEqual([4]);
      const b = outerLinks(9);
      const got = await loadCheckpoint(store, '', b);
      expect([got.optimizerT, got.state.step]).toEqual([3, 5]);
      expect(await snapshot(b)).toEqual(t.fresh);
      const c = outerLinks(9);
      expect((await loadCheckpoint(store, 'checkpoint-1', c)).state).toEqual(state(new Rng(2)));
      expect(await snapshot(c)).toEqual(t.old);
    });

    it(`${name}: a root save that dies before any mutating call leaves the complete old or new checkpoint`, async () => {
      const t = await saveDirTemplate();
      const trial = async (n: number) => {
        const store = await make(t.mem.files);
        const ok = await saveCheckpoint(crashAt(store, n), '', t.newer).then(() => true, (e: Error) => {
          expect(e.message).toBe(`simulated crash at call ${n}`);
          return false;
        });
        const b = outerLinks(70 + n);
        const got = await loadCheckpoint(store, '', b);
        const isNew = got.optimizerT === 3;
        expect(await snapshot(b)).toEqual(isNew ? t.fresh : t.old);
        expect(got.state).toEqual(isNew ? t.newer.state : state(new Rng(3)));
        expect(got.args).toEqual(t.newer.args);
        expect(await store.list('')).toEqual([...SIBLINGS, ...(isNew ? NEW_FILES : OLD_FILES)].sort());
        if (!isNew) for (const f of OLD_FILES) expect(await store.read(f), f).toEqual(t.mem.files.get(f));
        expect(Array.from(await store.read('model.safetensors'))).toEqual([1, 2, 3]);
        expect((await loadCheckpoint(store, 'checkpoint-1', outerLinks(9))).optimizerT).toBe(1);
        return ok ? 'saved' : isNew ? 'new' : 'old';
      };
      // every crash point in parallel (independent stores); the save has 26 mutating calls, so n = 27 succeeds
      const got = await Promise.all(Array.from({ length: 28 }, (_, i) => trial(i + 1)));
      // crashes before the 11 staged writes and the journal roll back; before the 11 renames, the stale
      // removal, the staging removal and the journal removal roll forward
      expect(got).toEqual([...Array(12).fill('old'), ...Array(14).fill('new'), 'saved', 'saved']);
    });
  }
});

describe('listCheckpoints / latestCheckpoint', () => {
  const at = (step: number, rngSeed = 3): CheckpointContent => ({
    ...content(outerLinks(1), 1, new Rng(rngSeed)),
    state: { ...state(new Rng(rngSeed)), step },
  });

  for (const { name, make } of stores) {
    it(`${name}: complete checkpoint-<step> folders by step, the root last when newest or tied`, async () => {
      const store = await make();
      expect(await listCheckpoints(store, 'runs/x')).toEqual([]);
      await expect(latestCheckpoint(store, 'runs/x')).rejects.toThrow(MissingCheckpoint);
      await expect(latestCheckpoint(store, 'runs/x')).rejects.toThrow(/no complete checkpoint in runs\/x/);
      for (const s of [10, 2, 5, 8]) await saveCheckpoint(store, `runs/x/checkpoint-${s}`, at(s));
      await store.remove('runs/x/checkpoint-8/optimizer.safetensors'); // damaged: not listed
      await store.write('runs/x/checkpoint-12/.ckpt-staging/trainer_state.json', new Uint8Array([1])); // unfinished first save
      await store.write('runs/x/checkpoint-x/trainer_state.json', new Uint8Array([1]));
      await store.write('runs/x/model.bin', new Uint8Array([1]));
      const folders = [2, 5, 10].map((s) => ({ step: s, dir: `runs/x/checkpoint-${s}` }));
      expect(await listCheckpoints(store, 'runs/x/')).toEqual(folders);
      expect(await latestCheckpoint(store, 'runs/x')).toEqual({ step: 10, dir: 'runs/x/checkpoint-10' });

      await saveCheckpoint(store, 'runs/x', at(4));
      expect(await listCheckpoints(store, 'runs/x')).toEqual([folders[0], { step: 4, dir: 'runs/x' }, ...folders.slice(1)]);
      expect((await latestCheckpoint(store, 'runs/x')).dir).toBe('runs/x/checkpoint-10');
      await saveCheckpoint(store, 'runs/x', at(10));
      expect((await listCheckpoints(store, 'runs/x')).map((c) => c.dir)).toEqual([...folders.map((f) => f.dir), 'runs/x']);
      expect(await latestCheckpoint(store, 'runs/x')).toEqual({ step: 10, dir: 'runs/x' });
      // --resume pointing at one checkpoint folder
      expect(await latestCheckpoint(store, 'runs/x/checkpoint-5')).toEqual({ step: 5, dir: 'runs/x/checkpoint-5' });
      expect(await store.exists('runs/x/checkpoint-12/.ckpt-staging')).toBe(true); // listing changed nothing
    });

    it(`${name}: the store root as save_dir, and a root save interrupted before and after its commit point`, async () => {
      const t = await saveDirTemplate(); // root: step 2; checkpoint-1: step 2 (its trainer state)
      const files = [...t.mem.files.keys()].filter((k) => !k.includes('/')).length;
      for (const [n, step] of [[files, 2], [files + 4, 5]] as const) {
        const store = await make(t.mem.files);
        await expect(saveCheckpoint(crashAt(store, n), '', t.newer)).rejects.toThrow(/simulated crash/);
        const before = await store.list('');
        expect(await listCheckpoints(store, '.')).toEqual([{ step: 1, dir: 'checkpoint-1' }, { step, dir: '' }]);
        expect(await store.list('')).toEqual(before); // read-only: the interrupted commit is still there
        expect(before).toContain('.ckpt-staging');
        expect((await loadCheckpoint(store, (await latestCheckpoint(store, '')).dir, outerLinks(9))).state.step).toBe(step);
        expect(await store.list('')).not.toContain('.ckpt-staging');
      }
    });
  }
});

describe('pruneCheckpoints (--save_total_limit)', () => {
  it('keeps the newest N checkpoint-<step> folders by step (not by name), and the top-level save', async () => {
    const store = nodeStore(join(root, 'prune'));
    const a = outerLinks(3);
    const rng = new Rng(7);
    for (const step of [2, 4, 10, 6, 8]) await saveCheckpoint(store, `checkpoint-${step}`, content(a, step, rng));
    await saveCheckpoint(store, '.', content(a, 12, rng));
    expect(await pruneCheckpoints(store, '.', 2)).toEqual(['checkpoint-2', 'checkpoint-4', 'checkpoint-6']);
    expect((await store.list('')).filter((n) => n.startsWith('checkpoint-'))).toEqual(['checkpoint-10', 'checkpoint-8']);
    // the top-level save stays (its trainer state says step 2 here: listed by that step)
    expect((await listCheckpoints(store, '.')).map((c) => c.dir)).toEqual(['', 'checkpoint-8', 'checkpoint-10']);
    expect(await pruneCheckpoints(store, '.', 2)).toEqual([]);
    await expect(pruneCheckpoints(store, '.', 0)).rejects.toThrow(/save_total_limit must be a positive integer, got 0/);
  });

  it('a crash between setting a folder aside and deleting it leaves no checkpoint-looking folder; the next call deletes it', async () => {
    const store = nodeStore(join(root, 'prune-crash'));
    const a = outerLinks(5);
    const rng = new Rng(8);
    for (const step of [1, 2, 3]) await saveCheckpoint(store, `checkpoint-${step}`, content(a, step, rng));
    // the process died after the rename of checkpoint-1: its files are still there, under the aside name
    const dying: FileStore = { ...store, remove: async () => { throw new Error('killed'); } };
    await expect(pruneCheckpoints(dying, '.', 2)).rejects.toThrow('killed');
    expect(await store.list('')).toEqual(['.pruned-checkpoint-1', 'checkpoint-2', 'checkpoint-3']);
    expect((await latestCheckpoint(store, '.')).dir).toBe('checkpoint-3');
    expect((await listCheckpoints(store, '.')).map((c) => c.step)).toEqual([2, 3]);
    expect(await pruneCheckpoints(store, '.', 2)).toEqual([]);
    expect(await store.list('')).toEqual(['checkpoint-2', 'checkpoint-3']);
  });
});
