// util/: what every layer may use: the seeded Rng, the lazy import of Node-only modules, a turn of the event loop.
export * from './rng';
export * from './node-import';
export * from './yield';
