import { describe, expect, it } from 'vitest';
import { memoryKv } from './kv';
import { DEFAULT_PAGE_HUB, hubFromQuery, hubSettingsOf, readPageHub, writePageHub } from './hub-settings';

describe("the page's hub settings", () => {
  it('default to the public hub, store changes over what is kept, and give the hub client its settings', async () => {
    const kv = memoryKv();
    expect(await readPageHub(kv)).toEqual(DEFAULT_PAGE_HUB);
    expect(await writePageHub({ endpoint: 'http://127.0.0.1:8080/', token: ' hf_x ' }, kv)).toEqual({
      endpoint: 'http://127.0.0.1:8080', token: 'hf_x', cacheOnly: false,
    });
    expect(await writePageHub({ cacheOnly: true }, kv)).toEqual({ endpoint: 'http://127.0.0.1:8080', token: 'hf_x', cacheOnly: true });
    expect(hubSettingsOf(await readPageHub(kv))).toEqual({ endpoint: 'http://127.0.0.1:8080', token: 'hf_x', offline: true });
    expect(hubSettingsOf(DEFAULT_PAGE_HUB)).toEqual({ endpoint: 'https://huggingface.co' });
  });

  it('refuses a bad address by name and keeps the stored one; a damaged stored value falls back to the default', async () => {
    const kv = memoryKv();
    await writePageHub({ endpoint: 'http://mirror.test' }, kv);
    await expect(writePageHub({ endpoint: 'javascript:alert(1)' }, kv)).rejects.toMatchObject({
      name: 'InvalidArgument', message: "the hub address 'javascript:alert(1)' must be an http(s) URL, like https://huggingface.co",
    });
    expect((await readPageHub(kv)).endpoint).toBe('http://mirror.test');
    kv.map.set('hub', { endpoint: 'not a url', token: 7, cacheOnly: 'yes' });
    expect(await readPageHub(kv)).toEqual(DEFAULT_PAGE_HUB);
  });

  it('reads ?hub= from a page URL', () => {
    expect(hubFromQuery('?tab=ask&hub=http%3A%2F%2F127.0.0.1%3A9%2F')).toBe('http://127.0.0.1:9');
    expect(hubFromQuery('?tab=ask')).toBeNull();
    expect(() => hubFromQuery('?hub=file:///etc')).toThrow(/\?hub= 'file:\/\/\/etc' must be an http\(s\) URL/);
  });
});
