import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inProcessCli } from './in-process';

/**
 * `schedule create` refuses a URL source on an address the image downloads' guard refuses, at once and before it
 * connects (Temporal's address is a closed port: a command that connected would fail with the connection's error).
 */
const cli = inProcessCli('imagebatch-schedule-source-');
const env = () => ({ TEMPORAL_ADDRESS: '127.0.0.1:1', IMAGEBATCH_LEDGER: path.join(cli.dir, 'ledger.sqlite') });

describe('schedule create with a URL source', () => {
  it.each([
    ['http://10.0.0.5/prompts.csv', 'refused to download from 10.0.0.5: a private address'],
    ['http://169.254.169.254/latest/meta-data/', 'refused to download from 169.254.169.254: a link-local address'],
  ])('%s is refused, naming the address class; no schedule is made', async (url, words) => {
    const code = await cli.run(env(), 'schedule', 'create', 'nightly', '--file', url, '--every', '1h');
    const printed = cli.stderr.join('');
    expect(printed).toContain(`imagebatch: the batch source ${url} is refused: ${words}`);
    expect(printed).not.toMatch(/connect|deadline/i);
    expect(code).toBe(1);
    expect(cli.stdout.join('')).toBe('');
  });
});

describe('schedule create with a local source', () => {
  it('outside the output folder and IMAGEBATCH_SCHEDULE_SOURCES: refused at once, saying what to set', async () => {
    const file = path.join(cli.dir, 'prompts.csv');
    await writeFile(file, 'prompt,model\na kite,sdxl\n');
    const out = path.join(cli.dir, 'elsewhere');
    const code = await cli.run(env(), 'schedule', 'create', 'nightly', '--file', file, '--out', out, '--every', '1h');
    const printed = cli.stderr.join('');
    expect(printed).toContain(`imagebatch: the batch source ${file} is refused: a schedule reads files only in`);
    expect(printed).toContain(`set IMAGEBATCH_SCHEDULE_SOURCES=${cli.dir} for the worker and the CLI`);
    expect(printed).not.toMatch(/connect|deadline/i);
    expect(code).toBe(1);
    expect(cli.stdout.join('')).toBe('');
  });

  it('inside a folder of IMAGEBATCH_SCHEDULE_SOURCES: checked, then it goes on to connect', async () => {
    const file = path.join(cli.dir, 'allowed.csv');
    await writeFile(file, 'prompt,model\na kite,sdxl\n');
    const allowed = { ...env(), IMAGEBATCH_SCHEDULE_SOURCES: cli.dir };
    const code = await cli.run(
      allowed,
      'schedule',
      'create',
      'n2',
      '--file',
      file,
      '--out',
      path.join(cli.dir, 'o'),
      '--every',
      '1h',
    );
    expect(cli.stderr.join('')).not.toContain('is refused');
    expect(code).not.toBe(0);
  });
});
