import { gzipSync } from 'node:zlib';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { describe, expect, it } from 'vitest';
import { parseCsvRows, parseParquetRows } from './data-files.ts';

describe('CSV data files (RFC 4180)', () => {
  it('reads quoted commas, doubled quotes, line breaks inside quotes, CRLF, a BOM, blank lines and a last line without a break', () => {
    const text = '\ufeffQuestion,Correct Answer,Note\r\n' +
      '"What is 1,5 + 1?","2,5",plain\r\n' +
      '\r\n' +
      '"He said ""hi""\nthen left.",x,"a\r\nb"\n' +
      '"",,\n' +
      'short\n' +
      'last,"",end';
    expect(parseCsvRows(text, 'f.csv')).toEqual([
      { Question: 'What is 1,5 + 1?', 'Correct Answer': '2,5', Note: 'plain' },
      { Question: 'He said "hi"\nthen left.', 'Correct Answer': 'x', Note: 'a\r\nb' },
      { Question: null, 'Correct Answer': null, Note: null },
      { Question: 'short', 'Correct Answer': null, Note: null },
      { Question: 'last', 'Correct Answer': null, Note: 'end' },
    ]);
  });
  it('keeps cells as written, names blank and repeated columns as pandas does, and says where a record is wrong', () => {
    expect(parseCsvRows('a,,a,a\n 1 ,007,x,"y"\n', 'f.csv')).toEqual([{ a: ' 1 ', 'Unnamed: 1': '007', 'a.1': 'x', 'a.2': 'y' }]);
    expect(parseCsvRows('a\n""\n', 'f.csv')).toEqual([{ a: null }]); // a lone "" is an empty cell, not a blank line
    expect(() => parseCsvRows('a,b\n1,2\n"x\ny",2,3\n', 'f.csv')).toThrow('f.csv line 3 has 3 fields but the header names 2');
    expect(() => parseCsvRows('a,b\n"open,2\n\n', 'f.csv')).toThrow('f.csv: the quoted field opened on line 2 is never closed');
    expect(() => parseCsvRows('a,b\n"x"y,2\n', 'f.csv')).toThrow('f.csv line 2: a quoted field is followed by "y", not a comma');
  });
});

describe('parquet data files', () => {
  const columns = [
    { name: 'question', data: ['q0', 'ünï ∑', null], type: 'STRING' as const },
    { name: 'n', data: [1n, -2n, 2n ** 60n], type: 'INT64' as const },
    { name: 'score', data: [0.5, -1.25, 3], type: 'DOUBLE' as const },
    { name: 'ok', data: [true, false, true], type: 'BOOLEAN' as const },
  ];
  const expected = [
    { question: 'q0', n: 1, score: 0.5, ok: true },
    { question: 'ünï ∑', n: -2, score: -1.25, ok: false },
    { question: null, n: '1152921504606846976', score: 3, ok: true },
  ];
  it('reads snappy and gzip pages; 64-bit integers past 2^53 stay exact as text', async () => {
    expect(await parseParquetRows(new Uint8Array(parquetWriteBuffer({ columnData: columns })), 'f.parquet')).toEqual(expected);
    const gz = parquetWriteBuffer({ columnData: columns, codec: 'GZIP', compressors: { GZIP: (b: Uint8Array) => gzipSync(b) } });
    expect(await parseParquetRows(new Uint8Array(gz), 'g.parquet')).toEqual(expected);
  });
  it('refuses a file that is not parquet, saying how to get the rows', async () => {
    await expect(parseParquetRows(new TextEncoder().encode('{"a":1}\n'), 'x.parquet')).rejects.toThrow(
      /^x\.parquet is not a readable parquet file \(.+\); delete it to fetch it again, or convert it to JSONL/,
    );
  });
});
