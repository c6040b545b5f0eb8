import type { BenchCase } from '../../testing';

export const benches: BenchCase[] = [];
