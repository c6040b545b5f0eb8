import type { ParityCase } from '../../testing';

// filled in by the adamw kernel work
export const cases: ParityCase[] = [];
