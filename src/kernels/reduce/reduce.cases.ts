import type { ParityCase } from '../../testing';

// filled in by the reduce kernel work
export const cases: ParityCase[] = [];
