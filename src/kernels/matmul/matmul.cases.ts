import type { ParityCase } from '../../testing';

// filled in by the matmul kernel work
export const cases: ParityCase[] = [];
