import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type * as Worker from '@temporalio/worker';
import { main } from '../../src/cli/main';

/**
 * What the terminal shows of the command line itself (#31 part 5): `--version`, the help of every command on one
 * screen, and a mistyped option or command answered with the error and the suggestion only. Through the real entry,
 * `main()`; no command here connects anywhere.
 */

type WorkerModule = typeof Worker;
// The test process has its Temporal runtime already; the command must not install another.
vi.mock('@temporalio/worker', async (importOriginal) => {
  const real = await importOriginal<WorkerModule>();
  return { ...real, Runtime: { install: () => undefined, instance: () => real.Runtime.instance() } };
});

let stdout: string[];
let stderr: string[];

beforeEach(() => {
  stdout = [];
  stderr = [];
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** Runs the CLI in this process; help is written at 80 columns, as on a terminal of that width or a pipe. */
async function run(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const code = await main(['node', 'imagebatch', ...args], {
    stdout: (text) => void stdout.push(text),
    stderr: (text) => void stderr.push(text),
    env: {},
  });
  return { code, out: stdout.join(''), err: stderr.join('') };
}

/** The commands a `Commands:` section of a help text lists (without `help`). */
function listedCommands(help: string): string[] {
  const section = help.split(/^Commands:\n/m)[1] ?? '';
  return [...section.matchAll(/^ {2}(\S+)/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
}

const SCREEN = 24;
const lines = (text: string) => text.replace(/\n$/, '').split('\n');

describe('--help fits one screen', () => {
  it(`imagebatch --help, and the help of every command and subcommand it lists: at most ${SCREEN} lines`, async () => {
    const seen: string[] = [];
    const tooLong: string[] = [];
    const walk = async (command: string[]): Promise<void> => {
      stdout = [];
      stderr = [];
      const r = await run(...command, '--help');
      expect(r.code, r.err).toBe(0);
      seen.push(command.join(' '));
      if (lines(r.out).length > SCREEN) tooLong.push(`imagebatch ${command.join(' ')} --help: ${lines(r.out).length}`);
      for (const sub of listedCommands(r.out)) await walk([...command, sub]);
    };
    await walk([]);
    expect(seen).toEqual(expect.arrayContaining(['', 'run', 'validate', 'schedule create', 'local status']));
    expect(seen.length).toBeGreaterThan(25);
    expect(tooLong).toEqual([]);
  });

  it("the worker's settings are in docs/settings.md, named in one line of its help", async () => {
    const r = await run('worker', '--help');
    expect(r.out).toContain('docs/settings.md');
    expect(r.out).not.toContain('IMAGEBATCH_MAX_CACHED_WORKFLOWS');
  });
});

describe('--version', () => {
  const version = (
    JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;

  it.each([['--version'], ['-V']])('imagebatch %s prints the version of package.json', async (flag) => {
    const r = await run(flag);
    expect(r.code).toBe(0);
    expect(r.out).toBe(`${version}\n`);
    expect(r.err).toBe('');
  });
});

describe('a mistyped option or command: the error, the suggestion, and where the usage is', () => {
  it('an unknown option of run', async () => {
    const r = await run('run', 'x.csv', '--folow');
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(lines(r.err)).toEqual([
      "error: unknown option '--folow'",
      '(Did you mean --follow?)',
      'imagebatch run --help for usage',
    ]);
  });

  it('an unknown command', async () => {
    const r = await run('rn', 'x.csv');
    expect(r.code).toBe(2);
    expect(lines(r.err)).toEqual(["error: unknown command 'rn'", '(Did you mean run?)', 'imagebatch --help for usage']);
  });

  it('an unknown subcommand of a group', async () => {
    const r = await run('schedule', 'craete', 'n');
    expect(r.code).toBe(2);
    expect(lines(r.err)).toEqual([
      "error: unknown command 'craete'",
      '(Did you mean create?)',
      'imagebatch schedule --help for usage',
    ]);
  });

  it('a missing argument', async () => {
    const r = await run('validate');
    expect(r.code).toBe(2);
    expect(lines(r.err)).toEqual(["error: missing required argument 'file'", 'imagebatch validate --help for usage']);
  });
});

describe('IMAGEBATCH_LOG_LEVEL', () => {
  it('is read from the environment the CLI is given, and a wrong one stops any command with its name', async () => {
    const code = await main(['node', 'imagebatch', '--version'], {
      stdout: (text) => void stdout.push(text),
      stderr: (text) => void stderr.push(text),
      env: { IMAGEBATCH_LOG_LEVEL: 'verbose' },
    });
    expect({ code, out: stdout.join(''), err: stderr.join('') }).toEqual({
      code: 1,
      out: '',
      err: 'imagebatch: IMAGEBATCH_LOG_LEVEL: must be debug or warn (got "verbose")\n',
    });
  });
});
