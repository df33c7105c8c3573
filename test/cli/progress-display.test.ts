import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { LogEntry } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { FailureType, type BatchProgress } from '../../src/model';
import { ProgressDisplay } from '../../src/cli/progress-display';
import { progressLine } from '../../src/cli/progress-line';
import { SdkLog } from '../../src/cli/sdk-log';
import { terminalWidth } from '../../src/cli/terminal-text';

/**
 * Issue #18: the progress line (about 100 columns) wrapped on an 80-column terminal and each redraw left a line
 * behind; the demo's warnings (a lost response retried on purpose, with a stack) read as a crash.
 */

function progress(over: Partial<BatchProgress> = {}): BatchProgress {
  return {
    batchId: 'b1',
    status: 'running',
    rowsRead: 50,
    invalidRows: 0,
    started: 45,
    inFlight: 5,
    counts: { succeeded: 42, failed: 1, unknown: 0, cancelled: 0, not_run: 0, images_unsaved: 2 },
    spentUsd: 1.58,
    refundedUsd: 0,
    unknownSpendRows: 1,
    reservedUsd: 0.2,
    unpricedInFlight: 0,
    spendCapUsd: 5,
    leftUsd: 3,
    rowsPerSecond: 2,
    runs: 0,
    newKeys: 0,
    done: false,
    waiting: {
      kind: 'batch_stop',
      details: { reason: 'insufficient balance: 日本語の説明', topUpUrl: 'https://pay.example/top-up' },
    },
    ...over,
  } as BatchProgress;
}

// eslint-disable-next-line no-control-regex
const SGR = /\x1b\[[0-9;]*m/g;

describe('progressLine within a width', () => {
  it.each([200, 120, 80, 79, 60, 40, 20, 8])('fits %i columns, the rows ended always shown', (columns) => {
    const line = progressLine(progress(), 50, { columns });
    expect(terminalWidth(line)).toBeLessThanOrEqual(columns);
    expect(line).toContain('45/50');
  });

  it('counts reused rows as ok and says how many; flags a price the service contradicts', () => {
    const p = progress({
      waiting: undefined,
      counts: { succeeded: 40, reused: 2, failed: 1, unknown: 0, cancelled: 0, not_run: 0, images_unsaved: 2 },
      pricesSeen: [{ model: 'flux-dev', givenUsd: 0.01, source: 'user', chargedUsd: 0.04 }],
    });
    const line = progressLine(p, 50);
    expect(line).toContain('ok 42 (2 reused)');
    expect(line).toContain('flux-dev charged $0.04/image, above the $0.01 given (--price): the cap counts $0.04');
    for (const columns of [120, 80, 40])
      expect(terminalWidth(progressLine(p, 50, { columns }))).toBeLessThanOrEqual(columns);
  });

  it('keeps every field in full when they fit, as without a width', () => {
    const p = progress({ waiting: undefined, spendCapUsd: undefined, unknownSpendRows: 0, leftUsd: undefined });
    expect(progressLine(p, 50, { columns: 200 })).toBe(progressLine(p, 50));
    expect(progressLine(p, 50)).toContain('in flight 5');
  });

  it('shortens the bar and drops the rate before it cuts why the batch waits', () => {
    const line = progressLine(progress(), 50, { columns: 79 });
    expect(line).toMatch(/^45\/50 \| ok 42 \| failed 1 \| unsaved 2 \| spent \$1\.58\+\/\$5\.00 \| waiting: stopped/);
    expect(line.endsWith('…')).toBe(true);
  });

  it('says which limit binds when a row reported one, short or gone before the rows ended go', () => {
    const quiet = progress({ waiting: undefined, spendCapUsd: undefined, unknownSpendRows: 0, leftUsd: undefined });
    expect(progressLine(quiet, 50)).not.toMatch(/bound/);
    expect(progressLine({ ...quiet, limit: 'open' }, 50)).not.toMatch(/bound/);
    expect(progressLine({ ...quiet, limit: 'rate' }, 50)).toContain("| bound by the key's request rate");
    const quota = progressLine({ ...quiet, limit: 'concurrency' }, 50);
    expect(quota).toContain("bound by the account's creations in flight");
    for (const columns of [100, 80, 60]) {
      const line = progressLine({ ...quiet, limit: 'concurrency' }, 50, { columns });
      expect(terminalWidth(line)).toBeLessThanOrEqual(columns);
      expect(line).toContain('45/50');
    }
    expect(progressLine({ ...quiet, limit: 'concurrency' }, 50, { columns: 100 })).toMatch(/quota-bound|creations in/);
  });

  it('shows the adaptive window: rows in flight out of its size, and the limit that cut it', () => {
    const quiet = progress({ waiting: undefined, spendCapUsd: undefined, unknownSpendRows: 0, leftUsd: undefined });
    const growing = progressLine({ ...quiet, window: { size: 24, ceiling: 256 } }, 50);
    expect(growing).toContain('| in flight 5/24 |');
    expect(growing).not.toMatch(/bound/);
    const cut = progressLine({ ...quiet, window: { size: 17, ceiling: 256, boundBy: 'concurrency' } }, 50);
    expect(cut).toContain("| in flight 5/17 | spent $1.58 | 2.0 rows/s ETA 3s | bound by the account's creations");
    const top = progressLine({ ...quiet, window: { size: 8, ceiling: 8, boundBy: 'ceiling' } }, 50);
    expect(top).toContain('in flight 5/8');
    expect(top).not.toMatch(/bound/);
    for (const columns of [80, 60])
      expect(
        terminalWidth(progressLine({ ...quiet, window: { size: 17, ceiling: 256, boundBy: 'rate' } }, 50, { columns })),
      ).toBeLessThanOrEqual(columns);
  });

  it('colors only when asked', () => {
    expect(progressLine(progress(), 50)).not.toMatch(SGR);
    const colored = progressLine(progress(), 50, { columns: 79, color: true });
    expect(colored).toMatch(SGR);
    expect(terminalWidth(colored.replace(SGR, ''))).toBeLessThanOrEqual(79);
  });
});

function sink() {
  const out: string[] = [];
  return { out, write: (text: string) => void out.push(text) };
}

describe('ProgressDisplay', () => {
  it('on a terminal, redraws one line within the width, lines printed meanwhile go above it', () => {
    const { out, write } = sink();
    const display = new ProgressDisplay({ write, tty: true, columns: () => 80, color: false, env: {} });
    display.update(progress(), 50);
    display.line('imagebatch: no worker answers');
    display.update(progress({ done: true, inFlight: 0 }), 50);
    display.end();
    const text = out.join('');
    expect(text.startsWith('\r\x1b[2K')).toBe(true);
    // Between two erasures, what is drawn never reaches the last column.
    for (const drawn of text.split('\r\x1b[2K')) {
      for (const line of drawn.split('\n')) expect(terminalWidth(line)).toBeLessThan(80);
    }
    // eslint-disable-next-line no-control-regex
    expect(text).toMatch(/^\r\x1b\[2K45\/50[^\n]*\r\x1b\[2Kimagebatch: no worker answers\n45\/50/);
    expect(text.endsWith('\n')).toBe(true);
    expect(text.match(/\n/g)).toHaveLength(2);
  });

  it('colors on a terminal unless NO_COLOR is set; never off a terminal', () => {
    const draw = (tty: boolean, env: Record<string, string>) => {
      const { out, write } = sink();
      new ProgressDisplay({ write, tty, columns: () => 80, color: true, env }).update(progress(), 50);
      return out.join('');
    };
    expect(draw(true, {})).toMatch(SGR);
    expect(draw(true, { NO_COLOR: '1' })).not.toMatch(SGR);
    expect(draw(false, {})).not.toMatch(SGR);
  });

  it('off a terminal, prints plain lines when something changed, at most one per interval, and the last', () => {
    const { out, write } = sink();
    let now = 0;
    const display = new ProgressDisplay({ write, tty: false, plainIntervalMs: 5000, now: () => now, env: {} });
    const at = (ms: number, p: BatchProgress) => {
      now = ms;
      display.update(p, 50);
    };
    const ended = (n: number) => progress({ counts: { ...progress().counts, succeeded: n } });
    at(0, ended(10));
    at(500, ended(11)); // too soon
    at(1000, ended(12)); // too soon
    at(5000, ended(12));
    at(5500, { ...ended(12), rowsPerSecond: 3 }); // only the rate changed
    at(20_000, { ...ended(12), rowsPerSecond: 1 }); // nothing new to say
    at(20_500, { ...ended(13), done: true });
    display.end();
    expect(out.every((line) => line.endsWith('\n') && !line.includes('\x1b'))).toBe(true);
    expect(out.map((line) => /ok (\d+)/.exec(line)?.[1])).toEqual(['10', '12', '13']);
    // Off a terminal the lines are full: no width applies.
    expect(out[0]).toBe(`${progressLine(ended(10), 50)}\n`);
  });
});

describe('SdkLog', () => {
  const entry = (level: LogEntry['level'], message: string, meta?: Record<string, unknown>): LogEntry => ({
    level,
    message,
    timestampNanos: 1_700_000_000_000_000_000n,
    ...(meta ? { meta } : {}),
  });

  it('writes to its file and sums up the warnings in one line that names it', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-sdk-log-'));
    try {
      const log = new SdkLog();
      const file = path.join(dir, 'logs', 'worker.log');
      log.toFile(file, 'imagebatch demo');
      log.write(entry('INFO', 'Worker state changed'));
      expect(log.summary()).toBeUndefined();
      const lost = ApplicationFailure.create({ message: 'outcome unknown: ECONNRESET', type: FailureType.Ambiguous });
      log.write(entry('WARN', 'Activity failed', { activityType: 'createImage', error: lost }));
      log.write(entry('WARN', 'Activity failed', { activityType: 'createImage', error: lost }));
      log.write(entry('ERROR', 'Worker failed', { error: new Error('boom\n    at somewhere') }));
      expect(log.summary()).toBe(
        `1 error and 2 warnings logged (a lost response retried with its key; Worker failed: boom) — see ${file}`,
      );
      const text = await readFile(file, 'utf8');
      expect(text).toMatch(/^--- \S+ imagebatch demo\n/);
      expect(text).toContain('[WARN] Activity failed');
      expect(text).toContain('ImageApi.Ambiguous');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('to a writer (--verbose), no summary: the lines were shown', () => {
    const { out, write } = sink();
    const log = new SdkLog();
    log.toWriter(write);
    log.write(entry('WARN', 'Activity failed'));
    expect(out.join('')).toContain('[WARN] Activity failed');
    expect(log.summary()).toBeUndefined();
  });
});
