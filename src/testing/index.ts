// testing/: helpers shared by tests (Node and browser), parity suites and benchmarks.
export * from './close';
export * from './parity';
export * from './bench';
export * from './gradparity';
