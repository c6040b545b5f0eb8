/**
 * The key-value store under the model file cache (models.ts): IndexedDB through idb-keyval in the page and its
 * workers, or a Map in Node tests and a runner without IndexedDB.
 */
import { clear as idbClear, createStore, delMany, get, keys as idbKeys, setMany, type UseStore } from 'idb-keyval';

/** The key-value store under the cache (IndexedDB by default; tests inject wrappers). */
export interface Kv {
  get(key: string): Promise<unknown>;
  /** All entries in one transaction: either all are stored or none. */
  setMany(entries: [string, unknown][]): Promise<void>;
  delMany(keys: string[]): Promise<void>;
  keys(): Promise<string[]>;
  clear(): Promise<void>;
}

/** An IndexedDB database `dbName` with one object store, through idb-keyval. */
export function idbKv(dbName = 'rmas-models', storeName = 'files'): Kv {
  const s: UseStore = createStore(dbName, storeName);
  return {
    get: (k) => get(k, s),
    setMany: (e) => setMany(e, s),
    delMany: (k) => delMany(k, s),
    keys: () => idbKeys<string>(s),
    clear: () => idbClear(s),
  };
}

/** A Map behind the Kv interface (Node tests; a runner without IndexedDB). */
export function memoryKv(): Kv & { map: Map<string, unknown> } {
  const map = new Map<string, unknown>();
  return {
    map,
    get: async (k) => map.get(k),
    setMany: async (e) => e.forEach(([k, v]) => map.set(k, v)),
    delMany: async (ks) => ks.forEach((k) => map.delete(k)),
    keys: async () => [...map.keys()],
    clear: async () => map.clear(),
  };
}
