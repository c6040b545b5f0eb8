/**
 * `npx tsx models/tiny/task.ts --out DIR`: the tiny task's splits (src/eval/tiny-task.ts) as train.jsonl,
 * validation.jsonl and test.jsonl.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { taskSplit, toJsonl } from '../../src/eval/tiny-task.ts';

async function main(argv: string[]): Promise<void> {
  let out: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--out' && argv[i + 1]) out = argv[++i]!;
    else if (argv[i]!.startsWith('--out=')) out = argv[i]!.slice('--out='.length);
    else {
      process.stderr.write(`unknown argument ${argv[i]}; usage: tsx models/tiny/task.ts --out DIR\n`);
      process.exit(2);
    }
  }
  if (!out) {
    process.stderr.write('no output folder; usage: tsx models/tiny/task.ts --out DIR\n');
    process.exit(2);
  }
  await mkdir(out, { recursive: true });
  for (const name of ['train', 'validation', 'test'] as const) {
    const rows = taskSplit(name);
    await writeFile(join(out, `${name}.jsonl`), toJsonl(rows), 'utf8');
    process.stdout.write(`${name}: ${rows.length} rows -> ${join(out, `${name}.jsonl`)}\n`);
  }
}

await main(process.argv.slice(2));
