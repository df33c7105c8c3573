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
