import type { ParityCase } from '../../testing';

// filled in by the attention kernel work
export const cases: ParityCase[] = [];
