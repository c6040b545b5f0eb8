// The parity cases of every kernel folder (one list, shared with the page's self-test).
export { allCases } from '../../src/kernels/cases';
