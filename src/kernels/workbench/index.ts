// workbench/: how a kernel is checked and timed. The tests, the benchmarks and the page (its kernel self-test and
// bench page) all run the kernels' parity cases and benchmarks through it, so it is library code, not test support.
export * from './close';
export * from './parity';
export * from './gradparity';
export * from './bench';
