import type { ParityCase } from '../../testing';

// filled in by the embedding kernel work
export const cases: ParityCase[] = [];
