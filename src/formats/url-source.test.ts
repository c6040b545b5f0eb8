import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandInHub, startHub } from '../../test/util/hub';
import { urlSource } from './sources';

const root = mkdtempSync(join(tmpdir(), 'rmas-url-source-'));
const BYTES = Uint8Array.from({ length: 5000 }, (_, i) => (i * 13 + 5) & 255);
let hub: StandInHub;
beforeAll(async () => {
  mkdirSync(join(root, 'repo'));
  writeFileSync(join(root, 'repo', 'blob.bin'), BYTES);
  hub = await startHub({ repos: [{ id: 'o/r', dir: join(root, 'repo') }] });
});
afterAll(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

describe('urlSource over a connection that drops', () => {
  it('asks a dropped range again, twice, and returns the exact bytes', async () => {
    const url = `${hub.url}/o/r/resolve/main/blob.bin`;
    hub.fault({ kind: 'drop', file: 'blob.bin', afterBytes: 100, times: 2 });
    const from = hub.log.length;
    const src = urlSource(url);
    expect(await src.read(1000, 3000)).toEqual(BYTES.subarray(1000, 4000));
    // the size probe (one byte, not dropped), then the hub's redirect and the CDN's body, three times
    expect(hub.log.slice(from).filter((q) => q.server === 'cdn').map((q) => [q.range, q.bytes])).toEqual([
      ['bytes=0-0', 1], ['bytes=1000-3999', 100], ['bytes=1000-3999', 100], ['bytes=1000-3999', 3000],
    ]);
  });

  it('a third drop is DownloadFailed naming the bytes and what to do', async () => {
    const url = `${hub.url}/o/r/resolve/main/blob.bin`;
    hub.fault({ kind: 'drop', file: 'blob.bin', afterBytes: 100, times: 3 });
    await expect(urlSource(url).read(0, 4000)).rejects.toMatchObject({
      name: 'DownloadFailed',
      message: expect.stringMatching(new RegExp(`^${url}: the connection dropped while reading bytes 0-3999 \\(.*\\) three times; ` +
        'check the network and load again$')),
    });
  });
});
