/**
 * The paper's accuracies ("Recursive Multi-Agent Systems", 2026; each the mean of 5 runs, as reported,
 * not checked against the PDF), so that `rmas run` can print what a run is expected to reproduce.
 * Table 2: sequential styles, RecursiveMAS (latent) and Recursive-TextMAS (text), r = 1..3; Light's code
 * benchmark is MBPP+, Scaled's LiveCodeBench; AIME is pass@10. Tables 6–8: the other styles at r = 3.
 */
import type { BenchmarkName } from './datasets';

export interface PaperFigure {
  /** Accuracy in percent. */
  accuracy: number;
  /** Where it is in the paper. */
  source: string;
}

type Row = Partial<Record<BenchmarkName, number>>;
const T2_COLUMNS = ['math500', 'aime25', 'aime26', 'gpqa', 'medqa', 'code'] as const;

/** Table 2, [rounds - 1][text, latent] → the six columns, Light then Scaled. */
const TABLE2: readonly (readonly [readonly number[], readonly number[]])[] = [
  [
    [71.9, 24.0, 16.7, 28.1, 29.0, 30.7, 84.2, 71.3, 76.7, 61.5, 76.1, 38.5],
    [75.8, 30.7, 17.3, 30.3, 30.3, 35.1, 86.3, 80.0, 82.7, 63.1, 78.2, 40.1],
  ],
  [
    [72.5, 23.3, 10.0, 28.7, 28.3, 30.0, 84.4, 70.7, 77.3, 59.1, 76.1, 38.0],
    [76.6, 33.3, 18.7, 32.3, 31.2, 36.9, 87.1, 86.0, 84.0, 64.6, 78.3, 41.3],
  ],
  [
    [69.1, 18.0, 16.7, 28.7, 28.5, 29.3, 85.8, 73.3, 74.7, 58.6, 77.1, 36.5],
    [77.8, 34.0, 20.0, 32.6, 31.7, 37.4, 88.2, 86.7, 86.0, 66.2, 79.3, 42.8],
  ],
];

/** RecursiveMAS at r = 3 in the other styles' tables. */
const OTHER_STYLES: Readonly<Record<string, { table: string; row: Row }>> = {
  distillation: { table: 'Table 6', row: { aime26: 83.3, gpqa: 70.0, livecodebench: 40.1, mbppplus: 71.9, medqa: 83.0 } },
  mixture: { table: 'Table 7', row: { aime26: 46.7, gpqa: 43.0, livecodebench: 23.8, medqa: 61.7 } },
  deliberation: { table: 'Table 8', row: { aime26: 90.0, gpqa: 65.0, hotpotqa: 41.4, bamboogle: 53.7 } },
};

/** The paper's accuracy for a style, benchmark, round count and mode, or null when the paper has none. */
export function paperAccuracy(style: string, dataset: BenchmarkName | null, rounds: number, mode: 'latent' | 'text'): PaperFigure | null {
  if (!dataset) return null;
  const what = `r = ${rounds}, ${mode === 'latent' ? 'RecursiveMAS' : 'Recursive-TextMAS'}`;
  if (style === 'sequential_light' || style === 'sequential_scaled') {
    const scaled = style === 'sequential_scaled';
    const code = scaled ? 'livecodebench' : 'mbppplus';
    const col = dataset === code ? T2_COLUMNS.indexOf('code') : (T2_COLUMNS as readonly string[]).indexOf(dataset);
    const row = TABLE2[rounds - 1]?.[mode === 'latent' ? 1 : 0];
    if (col < 0 || !row) return null;
    return { accuracy: row[col + (scaled ? 6 : 0)]!, source: `Table 2, ${scaled ? 'Scaled' : 'Light'}, ${what}` };
  }
  const other = OTHER_STYLES[style];
  const acc = other?.row[dataset];
  if (!other || acc === undefined || rounds !== 3 || mode !== 'latent') return null;
  return { accuracy: acc, source: `${other.table}, ${style}, ${what}` };
}
