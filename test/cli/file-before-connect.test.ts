import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inProcessCli } from './in-process';

/**
 * Every command that takes a batch file reads it before it connects to Temporal: a missing or wrong file is said at
 * once, not after a connection attempt. Through the real entry, `main()`, with the real client and Temporal's
 * address on a closed port: had the command connected first, it would fail with the connection's error (after its
 * timeout), never with the file's.
 */

const CLOSED = { TEMPORAL_ADDRESS: '127.0.0.1:1' };

const cli = inProcessCli('imagebatch-file-first-');
const run = (...args: string[]) => cli.run(CLOSED, ...args);

describe('a command reads its file before it connects', () => {
  it.each([
    ['run', (file: string) => ['run', file, '--model', 'm']],
    ['validate --catalog', (file: string) => ['validate', file, '--model', 'm', '--catalog']],
    [
      'schedule create with a spend cap',
      (file: string) => ['schedule', 'create', 'nightly', '--file', file, '--every', '1h', '--spend-cap', '5'],
    ],
  ])('%s on a missing file: the file is named, nothing connected', async (_, args) => {
    const missing = path.join(cli.dir, 'missing.csv');
    const code = await run(...args(missing));
    const printed = cli.stderr.join('');
    expect(printed).toMatch(/^imagebatch: cannot read batch file .*missing\.csv: /);
    expect(printed).toContain(missing);
    expect(printed).not.toMatch(/connect|deadline/i);
    expect(code).toBe(3);
    expect(cli.stdout.join('')).toBe('');
  });

  it('run on a file with problems: exit 3 with every problem, nothing connected', async () => {
    const file = path.join(cli.dir, 'bad.csv');
    await writeFile(file, 'prompt,model\n,m\nok,\n');
    const code = await run('run', file);
    const printed = cli.stderr.join('');
    expect(printed).toMatch(/^imagebatch: 2 problem\(s\) in the batch file; nothing was started\n/);
    expect(printed).toContain('  line 2');
    expect(printed).toContain('  line 3');
    expect(printed).not.toMatch(/connect|deadline/i);
    expect(code).toBe(3);
  });
});
