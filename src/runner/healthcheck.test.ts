import { describe, expect, it } from 'vitest';
import { healthcheck, type HealthDeps } from './healthcheck';

const deps = (head: HealthDeps['head']): HealthDeps => ({
  webgpu: async () => { throw new Error('no webgpu in this test'); },
  cuda: async () => { throw new Error('no cuda in this test'); },
  head,
});

describe('healthcheck level 3', () => {
  it('checks the hub and the datasets rows API; a 4xx still counts as reachable', async () => {
    const asked: string[] = [];
    const r = await healthcheck(3, deps(async (url) => { asked.push(url); return url.includes('datasets') ? 404 : 200; }));
    expect(asked).toEqual(['https://huggingface.co', 'https://datasets-server.huggingface.co/']);
    const by = Object.fromEntries(r.checks.map((c) => [c.name, c]));
    expect(by.huggingface).toEqual({ level: 3, name: 'huggingface', status: 'ok', detail: 'HEAD https://huggingface.co: HTTP 200' });
    expect(by.datasets).toEqual({ level: 3, name: 'datasets', status: 'ok', detail: 'HEAD https://datasets-server.huggingface.co/: HTTP 404' });
    // levels include the ones below: cpu's allocation is checked too
    expect(by.cpu!.status).toBe('ok');
  });

  it('fails offline with what must come from local files instead', async () => {
    const r = await healthcheck(3, deps(async () => { throw Object.assign(new Error('fetch failed'), { cause: { code: 'ENOTFOUND' } }); }));
    expect(r.ok).toBe(false);
    const ds = r.checks.find((c) => c.name === 'datasets')!;
    expect(ds).toEqual({
      level: 3, name: 'datasets', status: 'fail',
      detail: 'offline: HEAD https://datasets-server.huggingface.co/ failed (ENOTFOUND); datasets and benchmarks must come from local files (--dataset_name FILE, --dataset_file) or the cache',
    });
    const slow = await healthcheck(3, deps(async () => { throw Object.assign(new Error('t'), { name: 'TimeoutError' }); }));
    expect(slow.checks.find((c) => c.name === 'huggingface')!.detail).toBe('offline: HEAD https://huggingface.co failed (no answer within 5 s); models must come from local folders or the cache');
  });
});

describe('healthcheck level 1', () => {
  it('lists the decoder families; every released style\'s backbones are among them', async () => {
    const r = await healthcheck(1, deps(async () => 200));
    const fam = r.checks.find((c) => c.name === 'families')!;
    expect(fam).toEqual({ level: 1, name: 'families', status: 'ok', detail: 'decoders: llama, qwen2, qwen3, mistral, gemma3, qwen3_5' });
  });
});
