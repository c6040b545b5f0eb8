import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CorruptCheckpoint } from '../errors';
import { SafetensorsFile, type StTensor, writeSafetensors } from './safetensors';
import { INDEX_FILE, ShardedSafetensors, openCheckpoint } from './safetensors-sharded';
import { fileSource, isNotFound, memorySource, urlSource } from './sources';

const f32 = (...v: number[]): StTensor => ({ dtype: 'F32', shape: [v.length], bytes: new Uint8Array(Float32Array.from(v).buffer) });
const values = (t: StTensor) => Array.from(new Float32Array(t.bytes.slice().buffer));
const ascii = (s: string) => new TextEncoder().encode(s);

const FILE = writeSafetensors({ 'embed.weight': f32(1, 2, 3), 'norm.weight': f32(-0.5) }, { format: 'pt' });
const SHARD1 = writeSafetensors({ 'embed.weight': f32(1, 2, 3), 'layers.0.w': f32(4) });
const SHARD2 = writeSafetensors({ 'norm.weight': f32(-0.5), 'lm_head.weight': f32(7, 8) });
const INDEX = JSON.stringify({
  metadata: { total_size: 32 },
  weight_map: { 'embed.weight': 'model-00001-of-00002.safetensors', 'layers.0.w': 'model-00001-of-00002.safetensors',
    'norm.weight': 'model-00002-of-00002.safetensors', 'lm_head.weight': 'model-00002-of-00002.safetensors' },
});

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rmas-st-'));
  await writeFile(join(dir, 'single.safetensors'), FILE);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('file source', () => {
  it('reads a temp file lazily and exactly', async () => {
    const src = fileSource(join(dir, 'single.safetensors'));
    expect(await src.size()).toBe(FILE.length);
    expect(Array.from(await src.read(3, 5))).toEqual(Array.from(FILE.subarray(3, 8)));
    const f = await SafetensorsFile.open(src);
    expect(f.metadata).toEqual({ format: 'pt' });
    expect(values(await f.read('embed.weight'))).toEqual([1, 2, 3]);
    expect(values(await f.read('norm.weight'))).toEqual([-0.5]);
    await expect(src.read(FILE.length - 2, 3)).rejects.toThrow(/truncated/);
    await f.close();
  });

  it('names a missing file', async () => {
    const err = await fileSource(join(dir, 'nope.safetensors')).size().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CorruptCheckpoint);
    expect(isNotFound(err)).toBe(true);
    expect((err as Error).message).toMatch(/nope\.safetensors does not exist/);
  });

  it('memory source over a Blob', async () => {
    const f = await SafetensorsFile.open(memorySource(new Blob([FILE]), 'blob.safetensors'));
    expect(values(await f.read('embed.weight'))).toEqual([1, 2, 3]);
  });
});

type Mode = 'range' | 'ignore' | 'star' | 'wrong' | 'hidden';
interface Served { mode: Mode; requests: (string | undefined)[] }

/** A tiny server: /<mode>/<file> serves `files[file]`, honouring Range as `mode` says. */
function serve(files: Record<string, Uint8Array>, log: Served[]): Server {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const [, mode, ...rest] = (req.url ?? '').split('/');
    const body = files[rest.join('/')];
    log.push({ mode: mode as Mode, requests: [req.headers.range] });
    if (!body) return res.writeHead(404).end();
    if (req.method === 'HEAD' && mode === 'star') return res.writeHead(405).end();
    const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    if (mode === 'ignore' || !m) return res.writeHead(200, { 'content-length': body.length }).end(body);
    const a = Number(m[1]);
    const b = Math.min(Number(m[2]), body.length - 1);
    const total = mode === 'star' ? '*' : String(body.length);
    const shown = mode === 'wrong' ? `${a + 1}-${b + 1}` : `${a}-${b}`;
    // 'hidden' sends no Content-Range, as a browser shows a cross-origin reply that does not expose it.
    const cr = mode === 'hidden' ? {} : { 'content-range': `bytes ${shown}/${total}` };
    res.writeHead(206, { ...cr, 'content-length': b - a + 1 }).end(body.subarray(a, b + 1));
  });
}

describe('URL source (HTTP Range) and sharded checkpoints', () => {
  let server: Server;
  let base: string;
  const log: Served[] = [];
  beforeAll(async () => {
    server = serve({
      'single.safetensors': FILE, 'sharded/model-00001-of-00002.safetensors': SHARD1,
      'sharded/model-00002-of-00002.safetensors': SHARD2, [`sharded/${INDEX_FILE}`]: ascii(INDEX),
      'flat/model.safetensors': FILE,
    }, log);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('reads the header and tensors with range requests only', async () => {
    log.length = 0;
    const f = await SafetensorsFile.open(urlSource(`${base}/range/single.safetensors`));
    expect(values(await f.read('norm.weight'))).toEqual([-0.5]);
    const info = f.info('norm.weight');
    const ranges = log.map((l) => l.requests[0]);
    expect(ranges).toEqual(['bytes=0-0', 'bytes=0-7', `bytes=8-${f.dataStart - 1}`,
      `bytes=${f.dataStart + info.begin}-${f.dataStart + info.end - 1}`]);
  });

  it('takes the size from HEAD when Content-Range is hidden (CORS)', async () => {
    log.length = 0;
    const f = await SafetensorsFile.open(urlSource(`${base}/hidden/single.safetensors`));
    expect(values(await f.read('embed.weight'))).toEqual([1, 2, 3]);
    expect(log.length).toBe(5); // probe, HEAD, length, header, tensor
  });

  it('falls back to one full download when the server ignores Range', async () => {
    log.length = 0;
    const f = await SafetensorsFile.open(urlSource(`${base}/ignore/single.safetensors`));
    expect(values(await f.read('embed.weight'))).toEqual([1, 2, 3]);
    expect(values(await f.read('norm.weight'))).toEqual([-0.5]);
    expect(log.length).toBe(1);
    await expect(urlSource(`${base}/ignore/single.safetensors`, { maxFullBytes: 16 }).size())
      .rejects.toThrow(/ignores HTTP Range requests and the file is \d+ bytes, more than the 16 allowed/);
  });

  it('rejects unknown sizes, mismatched ranges and missing files with clear errors', async () => {
    await expect(urlSource(`${base}/star/single.safetensors`).size()).rejects.toThrow(/file size is unknown/);
    const wrong = urlSource(`${base}/wrong/single.safetensors`);
    await expect(wrong.read(8, 4)).rejects.toThrow(/asked for bytes 8-11, the server answered Content-Range "bytes 9-12\//);
    const err = await urlSource(`${base}/range/missing.safetensors`).size().catch((e: unknown) => e);
    expect(isNotFound(err)).toBe(true);
    expect((err as Error).message).toMatch(/missing\.safetensors does not exist \(HTTP 404\)/);
    const down = urlSource('http://127.0.0.1:1/x.safetensors');
    await expect(down.size()).rejects.toThrow(/x\.safetensors: the request failed/);
  });

  it('opens a sharded checkpoint over HTTP and a single-file one through openCheckpoint', async () => {
    const ck = await openCheckpoint(`${base}/range/sharded`);
    expect(ck).toBeInstanceOf(ShardedSafetensors);
    expect(ck.metadata).toEqual({ total_size: '32' });
    expect(values(await ck.read('lm_head.weight'))).toEqual([7, 8]);
    expect(values(await ck.read('layers.0.w'))).toEqual([4]);
    const flat = await openCheckpoint(`${base}/range/flat/`);
    expect(flat).toBeInstanceOf(SafetensorsFile);
    expect(values(await flat.read('embed.weight'))).toEqual([1, 2, 3]);
    await expect(openCheckpoint(`${base}/range/empty`)).rejects.toThrow(
      /has neither model\.safetensors\.index\.json nor model\.safetensors/,
    );
  });
});

describe('sharded checkpoints in a folder', () => {
  const folder = async (name: string, index: string, shards: Record<string, Uint8Array>) => {
    const d = join(dir, name);
    await import('node:fs/promises').then((fs) => fs.mkdir(d));
    await writeFile(join(d, INDEX_FILE), index);
    for (const [f, b] of Object.entries(shards)) await writeFile(join(d, f), b);
    return d;
  };
  const both = { 'model-00001-of-00002.safetensors': SHARD1, 'model-00002-of-00002.safetensors': SHARD2 };

  it('resolves tensors to their shards relative to the folder', async () => {
    const d = await folder('ok', INDEX, both);
    const ck = await ShardedSafetensors.open(d);
    expect(ck.names().sort()).toEqual(['embed.weight', 'layers.0.w', 'lm_head.weight', 'norm.weight']);
    expect(ck.info('norm.weight')).toMatchObject({ dtype: 'F32', shape: [1] });
    expect(values(await ck.read('embed.weight'))).toEqual([1, 2, 3]);
    expect(values(await ck.read('norm.weight'))).toEqual([-0.5]);
    expect(() => ck.info('model.layers.9.w')).toThrow(
      /model\.safetensors\.index\.json has no tensor "model\.layers\.9\.w" in its weight_map/,
    );
    await ck.close();
    expect(await openCheckpoint(d)).toBeInstanceOf(ShardedSafetensors);
  });

  it('names the missing shard, the misplaced tensor and a shard path that leaves the folder', async () => {
    const noShard = await folder('noshard', INDEX, { 'model-00001-of-00002.safetensors': SHARD1 });
    await expect(ShardedSafetensors.open(noShard)).rejects.toThrow(
      /model-00002-of-00002\.safetensors is missing, but .*model\.safetensors\.index\.json maps tensors to it/,
    );
    await expect(openCheckpoint(noShard)).rejects.toBeInstanceOf(CorruptCheckpoint);
    const moved = JSON.stringify({ weight_map: { 'norm.weight': 'model-00001-of-00002.safetensors' } });
    await expect(ShardedSafetensors.open(await folder('moved', moved, both)))
      .rejects.toThrow(/model-00001-of-00002\.safetensors has no tensor "norm\.weight", which .*index\.json places there/);
    const evil = JSON.stringify({ weight_map: { w: '../single.safetensors' } });
    await expect(ShardedSafetensors.open(await folder('evil', evil, {}))).rejects.toThrow(/tensor "w" maps to "\.\.\/single\.safetensors"/);
    await expect(ShardedSafetensors.open(await folder('badjson', '{"weight_map":', {}))).rejects.toThrow(/index\.json is not valid JSON/);
    await expect(ShardedSafetensors.open(await folder('nomap', '{}', {}))).rejects.toThrow(/has no "weight_map"/);
    const truncated = await folder('trunc', INDEX, { ...both, 'model-00002-of-00002.safetensors': SHARD2.subarray(0, SHARD2.length - 3) });
    await expect(ShardedSafetensors.open(truncated)).rejects.toThrow(/model-00002-of-00002\.safetensors: .*truncated/);
  });
});
