/**
 * The app's files over a stand-in for HTTP, for tests that run the engine worker's system calls in Node: `read(url)` the
 * bytes of a file under `root` for a URL under `base` (null outside it or when missing), and `planFetch`, a fetch
 * that serves them with Range requests (the memory plan reads sizes and headers that way).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export function appFiles(root: string, base: string): { read: (url: string) => Uint8Array | null; planFetch: typeof fetch } {
  const read = (url: string) => {
    if (!url.startsWith(base)) return null;
    try {
      return new Uint8Array(readFileSync(join(root, decodeURIComponent(url.slice(base.length)))));
    } catch {
      return null;
    }
  };
  const planFetch: typeof fetch = async (input, init) => {
    const b = read(String(input));
    if (!b) return new Response(null, { status: 404 });
    const m = /^bytes=(\d+)-(\d*)$/.exec(new Headers(init?.headers).get('range') ?? '');
    const [a, z] = m ? [Number(m[1]), Math.min(m[2] ? Number(m[2]) : b.length - 1, b.length - 1)] : [0, b.length - 1];
    const body = b.slice(a, z + 1);
    return new Response(body, {
      status: m ? 206 : 200,
      headers: { 'content-length': String(body.length), ...(m ? { 'content-range': `bytes ${a}-${z}/${b.length}` } : {}) },
    });
  };
  return { read, planFetch };
}
