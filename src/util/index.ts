// util/: what every layer may use: the seeded Rng, a value shown in a message, the lazy import of Node-only modules, a turn
// of the event loop, SHA-256, the median, the engine's overrides by name.
export * from './rng';
export * from './show';
export * from './node-import';
export * from './yield';
export * from './sha256';
export * from './stats';
export * from './override';
