// util/: what every layer may use: the seeded Rng and the lazy import of Node-only modules.
export * from './rng';
export * from './node-import';
