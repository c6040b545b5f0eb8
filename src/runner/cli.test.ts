/**
 * What `rmas` prints about itself, in-process (main(argv)): `--help` the list of commands, one line each;
 * `COMMAND --help` that command's usage alone (with what --device and --backend mean where it takes them); a bad
 * command line that command's usage; `--version` the package's version.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rmasInProcess as rmas } from '../../test/util/rmas';
import { ASK_USAGE } from './ask-cmd';
import { DEVICE_NOTES, USAGE, VERSION, commandUsage } from './cli';
import { GENERATE_USAGE } from './generate-cmd';
import { HEALTHCHECK_USAGE } from './healthcheck';
import { TRAIN_USAGE } from './train-args';

describe('rmas about itself', () => {
  it('--help (and -h) lists the commands, one line each, and nothing else', async () => {
    const want = `usage: rmas COMMAND [flags]   (rmas COMMAND --help: its flags; rmas --version: the version)
commands:
  forward      one model's hidden states and logits for token ids or embeddings
  generate     one model's text, with tokens/s and the GPU work per token
  ask          asks one or more questions through a system (upstream's run_custom.py)
  run          scores a benchmark with pass@k (upstream's inference/run.py)
  train-inner  trains one role's inner link on its frozen agent (upstream's train/train_inner.py)
  train-outer  trains a style's outer links through all its agents (upstream's train/train_outer.py)
  plan-memory  the device memory of a training step, before any weight is read
  convert      links between .pt, .safetensors and the page's bundles (.zip)
  download     fetches a style's repos, or any repo, into the Hugging Face cache (huggingface-cli download)
  healthcheck  dependencies, styles, devices and the hub's files (upstream's healthcheck.py)
`;
    expect(USAGE + '\n').toBe(want);
    expect(await rmas('--help')).toEqual({ code: 0, out: want, err: '' });
    expect(await rmas('-h')).toEqual({ code: 0, out: want, err: '' });
  });

  it('COMMAND --help prints that command\'s usage only', async () => {
    const ask = await rmas('ask', '--help');
    expect(ask).toEqual({ code: 0, out: `usage:\n${ASK_USAGE}\n${DEVICE_NOTES}\n`, err: '' });
    expect(DEVICE_NOTES.startsWith("  --device cuda|cpu|cuda:N (forward, generate, ask, run) is upstream's spelling")).toBe(true);
    // a command without device flags: its usage, no device notes
    expect(await rmas('healthcheck', '-h')).toEqual({ code: 0, out: `usage:\n${HEALTHCHECK_USAGE}\n`, err: '' });
    // train-inner and train-outer share theirs; a flag before --help changes nothing
    const outer = await rmas('train-outer', '--max_steps', '3', '--help');
    expect(outer).toEqual({ code: 0, out: `usage:\n${TRAIN_USAGE}\n${DEVICE_NOTES}\n`, err: '' });
  });

  it('a bad command line: the error, then that command\'s usage (exit 2); no command: the list', async () => {
    const bad = await rmas('generate', '--model', 'models/tiny/qwen3-tiny', '--bogus');
    expect(bad.code).toBe(2);
    expect(bad.out).toBe('');
    expect(bad.err).toMatch(/^rmas: Unknown option '--bogus'\..*\nusage:\n/);
    expect(bad.err.endsWith(`\nusage:\n${GENERATE_USAGE}\n${DEVICE_NOTES}\n`)).toBe(true);
    expect(commandUsage('generate')).toBe(`usage:\n${GENERATE_USAGE}\n${DEVICE_NOTES}`);
    expect(await rmas('nope')).toEqual({ code: 2, out: '', err: `rmas: unknown command "nope"\n${USAGE}\n` });
    expect(await rmas()).toEqual({ code: 2, out: '', err: `rmas: no command given\n${USAGE}\n` });
  });

  it('--version (and -v) prints the package version', async () => {
    const pkg = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string };
    expect(VERSION).toBe(pkg.version);
    expect(await rmas('--version')).toEqual({ code: 0, out: `rmas ${pkg.version}\n`, err: '' });
    expect(await rmas('-v')).toEqual({ code: 0, out: `rmas ${pkg.version}\n`, err: '' });
  });
});
