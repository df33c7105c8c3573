import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import type * as Worker from '@temporalio/worker';
import { main } from '../../src/cli/main';
import { duration } from '../../src/cli/options';

/**
 * Every numeric, duration and date option of every command is checked before anything starts: a bad value is a
 * usage error (exit 2) with one line that names the option and says what is wrong; no Temporal connection is made,
 * no server is started. Through the real entry, `main()`, with the client module replaced by one that counts.
 */

const started = vi.hoisted(() => ({ connections: 0 }));
type WorkerModule = typeof Worker;
// The test process has its Temporal runtime already; the command must not install another.
vi.mock('@temporalio/worker', async (importOriginal) => {
  const real = await importOriginal<WorkerModule>();
  return { ...real, Runtime: { install: () => undefined, instance: () => real.Runtime.instance() } };
});
vi.mock('../../src/cli/client', () => ({
  connectClient: () => {
    started.connections += 1;
    return Promise.reject(new Error('a connection was made'));
  },
  withClient: () => {
    started.connections += 1;
    return Promise.reject(new Error('a connection was made'));
  },
}));

let stdout: string[];
let stderr: string[];

beforeEach(() => {
  started.connections = 0;
  stdout = [];
  stderr = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => (stdout.push(String(chunk)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (stderr.push(String(chunk)), true));
});

afterEach(() => {
  vi.restoreAllMocks();
});

const run = (...args: string[]) => main(['node', 'imagebatch', ...args]);
const SCHEDULE = ['schedule', 'create', 'nightly', '--file', 'x.csv', '--every', '1h'];

describe('a bad option value exits 2 naming the option, before anything starts', () => {
  it.each([
    [['run', 'x.csv', '--spend-cap', 'abc'], '--spend-cap', /must be a number of dollars ≥ 0 \(got "abc"\)/],
    [['run', 'x.csv', '--spend-cap', '-1'], '--spend-cap', /≥ 0/],
    [['run', 'x.csv', '--spend-cap', '5usd'], '--spend-cap', /got "5usd"/],
    [['run', 'x.csv', '--deadline', 'tomorrow'], '--deadline', /date-time.*got "tomorrow"/],
    [['run', 'x.csv', '--deadline', '2030-13-40T00:00:00Z'], '--deadline', /date-time/],
    [['run', 'x.csv', '--concurrency', '0'], '--concurrency', /must be a whole number of at least 1/],
    [['run', 'x.csv', '--concurrency', '2.5'], '--concurrency', /whole number/],
    [['run', 'x.csv', '--concurrency', 'many'], '--concurrency', /whole number/],
    [['run', 'x.csv', '--max-attempts', '0'], '--max-attempts', /whole number/],
    [['run', 'x.csv', '--max-poll-wait', '500ms'], '--max-poll-wait', /at least 1 s, such as 90s, 45m or 2h/],
    [['run', 'x.csv', '--max-poll-wait', 'soon'], '--max-poll-wait', /got "soon"/],
    [['run', 'x.csv', '--batch-id', 'a/b'], '--batch-id', /A-Z a-z 0-9/],
    [['run', 'x.csv', '--batch-id', '..'], '--batch-id', /not only dots \(got "\.\."\)/],
    [['schedule', 'create', '.', '--file', 'x.csv', '--every', '1h'], '<id>', /not only dots/],
    [['resume', 'b1', '--spend-cap', 'abc'], '--spend-cap', /dollars/],
    [['pause', 'b1', '--spend-cap', 'NaN'], '--spend-cap', /dollars/],
    [['status', 'a b'], '<batch>', /A-Z a-z 0-9/],
    [['reconcile', 'b1', '--max-poll-wait', 'forever'], '--max-poll-wait', /duration/],
    [['doctor', '--spend-one', '--model', 'm', '--max-wait', 'abc'], '--max-wait', /duration/],
    [['doctor', '--spend-one', '--model', 'm', '--max-wait', '1h'], '--max-wait', /at most 15 min,/],
    [[...SCHEDULE, '--concurrency', '0'], '--concurrency', /whole number/],
    [[...SCHEDULE, '--concurrency', 'abc'], '--concurrency', /whole number/],
    [[...SCHEDULE, '--max-attempts', '-2'], '--max-attempts', /whole number/],
    [[...SCHEDULE, '--spend-cap', 'abc'], '--spend-cap', /dollars/],
    [['schedule', 'create', 'n', '--file', 'x.csv', '--every', 'daily'], '--every', /got "daily"/],
    [['schedule', 'create', 'n', '--file', 'x.csv', '--every', '10ms'], '--every', /at least 1 s/],
    [['schedule', 'create', 'n', '--file', 'x.csv'], '--cron', /exactly one of --cron and --every/],
    [[...SCHEDULE, '--overlap', 'queue'], '--overlap', /must be one of skip, buffer_one.* \(got "queue"\)/],
    [['simulator', '--port', '70000'], '--port', /0 to 65535/],
    [['simulator', '--files-port', 'abc'], '--files-port', /0 to 65535/],
    [['codec-server', '--port', '-1'], '--port', /0 to 65535/],
  ])('imagebatch %j', async (args, option, problem) => {
    const code = await run(...args);
    const printed = stderr.join('');
    expect(code, printed).toBe(2);
    const lines = printed.trimEnd().split('\n');
    expect(lines, printed).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^imagebatch: ${option}: `));
    expect(lines[0]).toMatch(problem);
    expect(stdout.join('')).toBe('');
    expect(started.connections).toBe(0);
  });
});

describe('good values pass the checks', () => {
  it('run with every checked option and a good file reaches the connection', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-options-'));
    const file = path.join(dir, 'x.csv');
    await writeFile(file, 'prompt,model\na cat,m\n');
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const args = ['run', file, '--spend-cap', '12.5', '--concurrency', '4', '--max-attempts', '2'];
    args.push('--deadline', '2030-01-01T00:00:00Z', '--max-poll-wait', '90s', '--batch-id', 'b.1');
    const code = await run(...args);
    expect(code).toBe(1);
    expect(stderr.join('')).toContain('a connection was made');
    expect(started.connections).toBe(1);
  });

  it.each([
    [['--every', '30 minutes', '--concurrency', '3']],
    [['--every', '1s', '--allow-frequent']],
    [['--cron', '0 2 * * *', '--timezone', 'Europe/Paris', '--catchup-window', '6h', '--jitter', '5m']],
  ])('schedule create %j (a good file) reaches the connection', async (options) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-options-'));
    const file = path.join(dir, 'x.csv');
    await writeFile(file, 'prompt,model\na cat,m\n');
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    // The file is in the schedule's output folder, where its worker may read it.
    expect(await run('schedule', 'create', 'n', '--file', file, '--out', dir, ...options)).toBe(1);
    expect(stderr.join('')).toContain('a connection was made');
    expect(started.connections).toBe(1);
  });
});

describe('one duration grammar: the SDK’s Duration strings (ms), always with a unit', () => {
  const parse = (value: string) => duration().safeParse(value);

  it('reads milliseconds, seconds, minutes, hours and days, in short or long words', () => {
    const cases: [string, number][] = [
      ['90s', 90_000],
      ['45m', 45 * 60_000],
      ['45min', 45 * 60_000],
      ['30 minutes', 30 * 60_000],
      ['2h', 2 * 3_600_000],
      ['1.5h', 90 * 60_000],
      ['1500ms', 1_500],
      ['1d', 86_400_000],
    ];
    for (const [value, ms] of cases) expect(parse(value), value).toEqual({ success: true, data: ms });
  });

  it('refuses a bare number (which unit?), less than 1 s, and what is not a duration', () => {
    for (const bad of ['', 'soon', '-5m', '500ms', '0', '30', '1e3s', 'x'.repeat(120)]) {
      const result = parse(bad);
      expect(result.success, bad).toBe(false);
      expect(result.error?.issues[0]?.message).toMatch(/must be a duration of at least 1 s/);
    }
  });

  it('a bound is part of the message, written as a duration the option takes', () => {
    expect(duration({ maxMs: 15 * 60_000 }).safeParse('16m').error?.issues[0]?.message).toBe(
      'must be a duration of at least 1 s and at most 15 min, such as 90s, 45m or 2h (got "16m")',
    );
    expect(duration({ maxMs: 15 * 60_000 }).safeParse('15 min')).toEqual({ success: true, data: 15 * 60_000 });
  });
});
