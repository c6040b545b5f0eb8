import type { ParityCase } from '../../testing';

// filled in by the sample kernel work
export const cases: ParityCase[] = [];
