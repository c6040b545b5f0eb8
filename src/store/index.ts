// store/: the browser's persistent state. Model files (chunked, hashed, resumable downloads) and link
// checkpoints in IndexedDB, checkpoint bundles (zip) shared with the runner, and download/memory plans.
export * from './plan';
export { specFiles } from './spec-files';
export {
  modelCache, idbKv, memoryKv, linkedSha256, isMissingFile, CHUNK_BYTES,
  type ModelCache, type ModelCacheOptions, type SourceOptions, type CachedFile, type FileMeta, type Kv,
} from './models';
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
export { checkpointRegistry, checkpoints, type CheckpointInfo, type CheckpointMeta, type CheckpointRegistry } from './checkpoints';
