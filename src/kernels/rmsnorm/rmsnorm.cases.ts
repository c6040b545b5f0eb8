import type { ParityCase } from '../../testing';

// filled in by the rmsnorm kernel work
export const cases: ParityCase[] = [];
