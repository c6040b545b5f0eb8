/** A stand-in host whose URLs name files on this disk, for loaders that take whole-file reads (LoadSpecOptions.fetchFile). */
import { readFileSync } from 'node:fs';

export const FILES_HOST = 'http://files.test';

/** The bytes of the file a FILES_HOST URL names, or null (→ 404) for a missing file or another host. */
export async function diskFetchFile(url: string): Promise<Uint8Array | null> {
  if (!url.startsWith(FILES_HOST)) return null;
  try {
    return new Uint8Array(readFileSync(decodeURIComponent(url.slice(FILES_HOST.length))));
  } catch {
    return null;
  }
}
