import type { ParityCase } from '../../testing';

// filled in by the layernorm kernel work
export const cases: ParityCase[] = [];
