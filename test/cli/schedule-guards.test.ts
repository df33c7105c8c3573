import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { inProcessCli } from './in-process';

/**
 * The guards of `schedule create` (issue 33, point 4): its options and its local file are checked before anything
 * connects, so nothing is created. Through the real entry, `main()`, with Temporal's address on a closed port: had the
 * command connected first, it would fail with the connection's error, never with the guard's.
 */

const CLOSED = { TEMPORAL_ADDRESS: '127.0.0.1:1' };

const cli = inProcessCli('imagebatch-schedule-guards-');
const run = (...args: string[]) => cli.run(CLOSED, ...args);
let good: string;

beforeAll(async () => {
  good = path.join(cli.dir, 'good.csv');
  await writeFile(good, 'id,prompt\na,a red kite\n');
});

/** The one line a refused option prints, and that nothing connected. */
function expectRefused(code: number, option: string, problem: RegExp) {
  const printed = cli.stderr.join('');
  expect(code, printed).toBe(2);
  const lines = printed.trimEnd().split('\n');
  expect(lines, printed).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^imagebatch: ${option}: `));
  expect(lines[0]).toMatch(problem);
  expect(printed).not.toMatch(/connect|deadline/i);
  expect(cli.stdout.join('')).toBe('');
}

describe('schedule create checks its local file at once', () => {
  it('a missing file: exit 3 naming it, nothing connected or created', async () => {
    const missing = path.join(cli.dir, 'missing.csv');
    const code = await run('schedule', 'create', 'nightly', '--file', missing, '--every', '1h');
    const printed = cli.stderr.join('');
    expect(printed).toMatch(/^imagebatch: cannot read batch file .*missing\.csv: /);
    expect(printed).not.toMatch(/connect|deadline/i);
    expect(code).toBe(3);
    expect(cli.stdout.join('')).toBe('');
  });

  it('a file with problems: exit 3 with each problem and its line, no schedule created', async () => {
    const bad = path.join(cli.dir, 'bad.csv');
    await writeFile(bad, 'prompt,model\n,m\nok,\n');
    const code = await run('schedule', 'create', 'nightly', '--file', bad, '--cron', '0 2 * * *');
    const printed = cli.stderr.join('');
    expect(printed).toMatch(/^imagebatch: 2 problem\(s\) in the batch file; no schedule was created\n/);
    expect(printed).toContain('  line 2');
    expect(printed).toContain('  line 3');
    expect(printed).not.toMatch(/connect|deadline/i);
    expect(code).toBe(3);
  });
});

describe('schedule create says what each run asks for and may spend (issue 33)', () => {
  it('an --each-run other than all or new, naming the two', async () => {
    const code = await run('schedule', 'create', 'nightly', '--file', good, '--every', '1h', '--each-run', 'changed');
    expectRefused(code, '--each-run', /must be one of all, new \(got "changed"\)/);
  });

  it('a budget that is not an amount a day or a month, or one period given twice', async () => {
    let code = await run('schedule', 'create', 'nightly', '--file', good, '--every', '1h', '--budget', '-5/day');
    expectRefused(code, '--budget', /expected <usd>\/day or <usd>\/month, e.g. 20\/day \(got "-5\/day"\)/);
    cli.stderr.length = 0;
    code = await run('schedule', 'create', 'nightly', '--file', good, '--every', '1h', '--budget', '5/week');
    expectRefused(code, '--budget', /got "5\/week"/);
    cli.stderr.length = 0;
    const twice = ['--budget', '5/day', '--budget', '300/month', '--budget', '6/day'];
    code = await run('schedule', 'create', 'nightly', '--file', good, '--every', '1h', ...twice);
    expectRefused(code, '--budget', /a budget a day is given twice/);
  });

  it('the help names the default, all, and the budgets', async () => {
    await run('schedule', 'create', '--help');
    const help = cli.stdout.join('');
    expect(help).toMatch(/--each-run <all\|new>[^-]*\(default: "all"\)/);
    expect(help).toMatch(/--budget <usd\/period>\s+all runs together: 20\/day, 300\/month/);
  });
});

describe('schedule create refuses what a person would not mean', () => {
  it('an unknown --timezone', async () => {
    const code = await run(
      'schedule',
      'create',
      'n',
      '--file',
      good,
      '--cron',
      '0 2 * * *',
      '--timezone',
      'Mars/Olympus',
    );
    expectRefused(code, '--timezone', /IANA time zone.*Europe\/Paris.*\(got "Mars\/Olympus"\)/);
  });

  it('CRON_TZ= inside the cron expression points to --timezone', async () => {
    const code = await run('schedule', 'create', 'n', '--file', good, '--cron', 'CRON_TZ=Europe/Paris 0 2 * * *');
    expectRefused(code, '--cron', /--timezone Europe\/Paris/);
  });

  it('--every 1s without --allow-frequent', async () => {
    const code = await run('schedule', 'create', 'n', '--file', good, '--every', '1s');
    expectRefused(code, '--every', /shorter than 1 min.*add --allow-frequent/);
  });

  it.each([['*/10 * * * * * *'], ['@every 30s']])(
    'a cron %j that fires more often than once a minute',
    async (cron) => {
      const code = await run('schedule', 'create', 'n', '--file', good, '--cron', cron);
      expectRefused(code, '--cron', /every 10 s|every 30 s/);
      expect(cli.stderr.join('')).toContain('add --allow-frequent');
    },
  );

  it('a --jitter as long as the interval', async () => {
    const code = await run('schedule', 'create', 'n', '--file', good, '--every', '1h', '--jitter', '1h');
    expectRefused(code, '--jitter', /shorter than the schedule's interval \(1 h\)/);
  });

  it('a --catchup-window under Temporal’s 10 s', async () => {
    const code = await run('schedule', 'create', 'n', '--file', good, '--every', '1h', '--catchup-window', '2s');
    expectRefused(code, '--catchup-window', /at least 10 s/);
  });
});
