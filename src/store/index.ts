// store/: the browser's persistent state. Model files (chunked, hashed, resumable downloads) and link
// checkpoints in IndexedDB, checkpoint bundles (zip) shared with the runner, and download/memory plans.
export * from './plan';
export * from './cached-fetch';
export * from './hub';
export * from './hub-settings';
export { specFiles } from './spec-files';
export {
  modelCache, linkedSha256, isMissingFile, CHUNK_BYTES,
  type ModelCache, type ModelCacheOptions, type SourceOptions, type CachedFile, type FileMeta,
} from './models';
export { idbKv, memoryKv, type Kv } from './kv';
export {
  exportBundle,
  importBundle,
  BUNDLE_FORMAT,
  BUNDLE_VERSION,
  BUNDLE_MANIFEST,
  type BundleMeta,
  type BundleInfo,
  type CheckpointFiles,
  type CheckpointKind,
} from './bundle';
export * from './idb-store';
export { checkpointRegistry, checkpoints, type CheckpointInfo, type CheckpointMeta, type CheckpointRegistry } from './checkpoint-registry';
