/**
 * Zip archives of STORED (uncompressed) entries: what `torch.save` writes and what checkpoint bundles are.
 * The reader goes through the central directory (torch's local headers carry zero sizes plus a trailing
 * data descriptor, so they cannot be walked front to back) and is zip64 aware; it refuses compressed
 * entries. The writer emits plain (non-zip64) archives with DOS time 0, optionally padding each entry's
 * data to an alignment with an "FB" extra field as torch does.
 */
import { CorruptCheckpoint, InvalidArgument } from '../errors';

const u16 = (b: Uint8Array, o: number) => b[o]! | (b[o + 1]! << 8);
const u32 = (b: Uint8Array, o: number) => (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
const u64 = (b: Uint8Array, o: number) => u32(b, o) + u32(b, o + 4) * 2 ** 32;

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE 802.3, the zip checksum). */
export function crc32(b: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = CRC_TABLE[(c ^ b[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export interface ZipReadOptions {
  /** What the archive should be, for the "not a zip" message (default 'a zip archive'). */
  kind?: string;
  /** What the user can do, appended to every error (default: re-download or re-export the file). */
  fix?: string;
  /** Extra advice for a compressed entry (default: re-zip with `zip -0`). */
  compressedHint?: string;
  /** Check each entry's CRC-32 against the central directory (default false). */
  verifyCrc?: boolean;
}

/**
 * The entries of a zip of STORED entries (name → a view into `b`, folder entries included as empty).
 * `name` names the archive in CorruptCheckpoint messages.
 */
export function readZip(b: Uint8Array, name: string, opts: ZipReadOptions = {}): Map<string, Uint8Array> {
  const fix = opts.fix ?? 're-download the file, or export it again';
  const corrupt = (what: string) => new CorruptCheckpoint(`${name}: ${what}; ${fix}`);
  const notZip = `not a zip archive (${opts.kind ?? 'a zip of stored entries'}), or truncated`;
  let eocd = -1;
  for (let o = b.length - 22; o >= Math.max(0, b.length - 22 - 0xffff); o--) {
    if (u32(b, o) === 0x06054b50) { eocd = o; break; }
  }
  if (eocd < 0) throw corrupt(`${notZip}: no end-of-central-directory record`);
  let count = u16(b, eocd + 10);
  let cdSize = u32(b, eocd + 12);
  let cdOff = u32(b, eocd + 16);
  if (count === 0xffff || cdSize === 0xffffffff || cdOff === 0xffffffff) {
    const loc = eocd - 20;
    if (loc < 0 || u32(b, loc) !== 0x07064b50) throw corrupt(`${notZip}: zip64 locator missing`);
    const z = u64(b, loc + 8);
    if (z + 56 > b.length || u32(b, z) !== 0x06064b50) throw corrupt(`${notZip}: zip64 end record missing`);
    count = u64(b, z + 32); cdSize = u64(b, z + 40); cdOff = u64(b, z + 48);
  }
  if (cdOff + cdSize > b.length) throw corrupt(`${notZip}: central directory past the end of the file`);
  const out = new Map<string, Uint8Array>();
  let p = cdOff;
  for (let i = 0; i < count; i++) {
    if (p + 46 > b.length || u32(b, p) !== 0x02014b50) throw corrupt(`zip central directory entry ${i} is damaged`);
    const method = u16(b, p + 10);
    const crc = u32(b, p + 16);
    let size = u32(b, p + 24);
    const usize = u32(b, p + 20) === 0xffffffff ? -1 : u32(b, p + 20);
    const nameLen = u16(b, p + 28), extraLen = u16(b, p + 30), commentLen = u16(b, p + 32);
    let local = u32(b, p + 42);
    const entry = new TextDecoder().decode(b.subarray(p + 46, p + 46 + nameLen));
    for (let e = p + 46 + nameLen; e + 4 <= p + 46 + nameLen + extraLen;) {
      const id = u16(b, e), len = u16(b, e + 2);
      if (id === 1) { // zip64: the 0xffffffff fields, in the order usize, csize, offset
        let q = e + 4;
        if (size === 0xffffffff) { size = u64(b, q); q += 8; }
        if (usize === -1) q += 8;
        if (local === 0xffffffff) local = u64(b, q);
      }
      e += 4 + len;
    }
    if (method !== 0) {
      throw corrupt(`zip entry "${entry}" is compressed (method ${method}); ${opts.compressedHint ?? 'only stored entries are read'}, ` +
        'so this file was repacked: unzip it and re-zip with `zip -0`');
    }
    if (local + 30 > b.length || u32(b, local) !== 0x04034b50) throw corrupt(`zip local header of "${entry}" is damaged`);
    const start = local + 30 + u16(b, local + 26) + u16(b, local + 28);
    if (start + size > b.length) throw corrupt(`zip entry "${entry}" runs past the end of the file (truncated)`);
    const data = b.subarray(start, start + size);
    if (opts.verifyCrc && crc32(data) !== crc) throw corrupt(`zip entry "${entry}" fails its CRC-32 check (damaged)`);
    // no writer puts a NUL in a name, and two entries of one name would leave which one is meant to the reader
    if (entry.includes('\0')) throw corrupt(`zip entry ${JSON.stringify(entry)} has a NUL character in its name`);
    if (out.has(entry)) throw corrupt(`zip entry "${entry}" appears twice (entries ${[...out.keys()].indexOf(entry)} and ${i})`);
    out.set(entry, data);
    p += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

export interface ZipWriteOptions {
  /** Pad every entry's data start to a multiple of this many bytes with an "FB" extra field (torch: 64). */
  align?: number;
  /** What is being written, for the size-limit message (default 'zip'). */
  what?: string;
  /** Advice when the archive would exceed 4 GiB. */
  tooLargeHint?: string;
}

/** A zip of STORED entries in the given order (no zip64: at most 65535 entries and 4 GiB). */
export function writeZip(entries: readonly (readonly [string, Uint8Array])[], opts: ZipWriteOptions = {}): Uint8Array {
  const align = opts.align ?? 0;
  if (!Number.isSafeInteger(align) || align < 0 || align > 0x8000)
    throw new InvalidArgument(`zip alignment ${align} must be an integer in 0..32768`);
  const tooLarge = () => new InvalidArgument(`${opts.what ?? 'zip'} over 4 GiB or 65535 entries is not supported (no zip64 writer)` +
    `${opts.tooLargeHint ? `; ${opts.tooLargeHint}` : ''}`);
  if (entries.length > 0xffff) throw tooLarge();
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let off = 0;
  for (const [name, data] of entries) {
    const nb = enc.encode(name);
    // bit 11: the name is UTF-8 (set only when it is not plain ASCII, so torch's archives keep flags 0)
    const flags = nb.length !== name.length ? 0x800 : 0;
    const extra = align > 1 ? 4 + ((align - ((off + 30 + nb.length + 4) % align)) % align) : 0;
    const pad = extra - 4;
    const h = new Uint8Array(30 + nb.length + extra);
    const v = new DataView(h.buffer);
    const crc = crc32(data);
    v.setUint32(0, 0x04034b50, true);
    v.setUint16(4, 20, true);
    v.setUint16(6, flags, true);
    v.setUint32(14, crc, true);
    v.setUint32(18, data.length, true);
    v.setUint32(22, data.length, true);
    v.setUint16(26, nb.length, true);
    v.setUint16(28, extra, true);
    h.set(nb, 30);
    if (extra) {
      v.setUint16(30 + nb.length, 0x4246, true);
      v.setUint16(32 + nb.length, pad, true);
      h.fill(0x5a, 34 + nb.length);
    }
    const c = new Uint8Array(46 + nb.length);
    const cv = new DataView(c.buffer);
    cv.setUint32(0, 0x02014b50, true);
    cv.setUint16(4, flags ? 0x314 : 20, true);
    cv.setUint16(6, 20, true);
    cv.setUint16(8, flags, true); // made by: Unix when UTF-8, for unzip
    cv.setUint32(16, crc, true);
    cv.setUint32(20, data.length, true);
    cv.setUint32(24, data.length, true);
    cv.setUint16(28, nb.length, true);
    cv.setUint32(42, off, true);
    c.set(nb, 46);
    parts.push(h, data);
    central.push(c);
    off += h.length + data.length;
    if (off > 0xffffffff) throw tooLarge();
  }
  const cdSize = central.reduce((a, c) => a + c.length, 0);
  if (off + cdSize > 0xffffffff) throw tooLarge();
  const end = new Uint8Array(22);
  const ev = new DataView(end.buffer);
  ev.setUint32(0, 0x06054b50, true); ev.setUint16(8, entries.length, true); ev.setUint16(10, entries.length, true);
  ev.setUint32(12, cdSize, true); ev.setUint32(16, off, true);
  const out = new Uint8Array(off + cdSize + 22);
  let p = 0;
  for (const x of [...parts, ...central, end]) { out.set(x, p); p += x.length; }
  return out;
}
