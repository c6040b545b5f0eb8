import type { ParityCase } from '../../testing';

// filled in by the softmax kernel work
export const cases: ParityCase[] = [];
