// gpu/: device acquisition, limits and features, buffer pool, pipeline cache, batching, readback, errors.
export * from './device';
export * from './pool';
export * from './pipelines';
export * from './context';
