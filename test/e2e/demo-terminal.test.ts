import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { BIN, baseEnv, ensureDistIsFresh } from '../cli/helpers';

/**
 * `imagebatch demo` as a person sees it on an 80-column terminal (a pseudo-terminal made by util-linux `script`).
 * Seen before issue #18: the progress line, about 100 columns, wrapped, and each redraw left a line behind; an
 * SDK warning with a stack trace for the lost response the demo loses on purpose read as a crash.
 */

const COLUMNS = 80;
let home: string;

beforeAll(async () => {
  await ensureDistIsFresh();
  home = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-cli-demo-tty-'));
});

afterAll(async () => {
  if (home) await rm(home, { recursive: true, force: true });
});

/** Runs `command` in a pseudo-terminal of `columns` columns; resolves to what the terminal received. */
function inTerminal(
  command: string,
  columns: number,
  timeoutMs: number,
): Promise<{ code: number | null; raw: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qfec', `stty cols ${columns} rows 24; exec ${command}`, '/dev/null'], {
      env: baseEnv({ TERM: 'xterm-256color' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let raw = '';
    child.stdout.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, raw });
    });
  });
}

/**
 * The screen's lines after `raw` is drawn on a terminal `columns` wide that never scrolls anything away: text,
 * CR, LF, the line and screen erasures and cursor-to-column a progress display uses; colors are ignored. A line
 * that reaches the last column wraps at the next character, as on a real terminal.
 */
function screen(raw: string, columns: number): string[] {
  const rows: string[][] = [[]];
  let row = 0;
  let col = 0;
  let wrapPending = false;
  const current = () => (rows[row] ??= []);
  // eslint-disable-next-line no-control-regex
  for (const [token] of raw.matchAll(/\x1b\[([0-9;?]*)([@-~])|\x1b.|[\s\S]/gu)) {
    // eslint-disable-next-line no-control-regex
    const csi = /^\x1b\[([0-9;?]*)([@-~])$/.exec(token);
    if (csi) {
      const n = Number(csi[1] || '0');
      switch (csi[2]) {
        case 'K':
          if (n === 2) rows[row] = [];
          else if (n === 0) current().length = Math.min(current().length, col);
          else current().fill(' ', 0, col + 1);
          break;
        case 'J':
          current().length = Math.min(current().length, col);
          rows.length = row + 1;
          break;
        case 'G':
          col = Math.max(0, n - 1);
          break;
        default: // colors and anything else move nothing
      }
      wrapPending = false;
    } else if (token === '\r') {
      col = 0;
      wrapPending = false;
    } else if (token === '\n') {
      row += 1;
      current();
      wrapPending = false;
    } else if (!token.startsWith('\x1b')) {
      if (wrapPending) {
        row += 1;
        col = 0;
        wrapPending = false;
      }
      const line = current();
      while (line.length < col) line.push(' ');
      line[col] = token;
      if (col === columns - 1) wrapPending = true;
      else col += 1;
    }
  }
  return rows.map((r) => r.join('').trimEnd());
}

it('demo on an 80-column terminal: one progress line redrawn in place, warnings in the log file', async () => {
  const { code, raw } = await inTerminal(`${process.execPath} ${BIN} demo --home '${home}'`, COLUMNS, 150_000);
  const lines = screen(raw, COLUMNS);
  const shown = lines.join('\n');
  expect(code, shown).toBe(0);
  // The progress (its bar or its count of the 50 rows) is on one line at the end, however often it was redrawn.
  const progressLines = lines.filter((l) => /\b\d+\/50 \| ok \d+/.test(l));
  expect(progressLines, shown).toHaveLength(1);
  expect(progressLines[0]).toMatch(/^(\[[#-]+\] )?50\/50 \| ok/);
  // No stack trace and no SDK warning on the terminal: the lost response is an outcome the demo handles.
  expect(shown).not.toMatch(/^\s+at /m);
  expect(shown).not.toMatch(/\[WARN\]|Activity failed|ApplicationFailure/);
  // One line says what was logged and where.
  const log = path.join(home, 'logs', 'worker.log');
  const summary = lines.filter((l) => l.includes('logged ('));
  expect(summary, shown).toEqual([
    expect.stringMatching(/^\d+ warnings? logged \(.*a lost response retried with its key/),
  ]);
  expect(raw.replace(/\r?\n/g, '')).toContain(`— see ${log}`);
  const logged = await readFile(log, 'utf8');
  expect(logged).toContain('[WARN] Activity failed');
  expect(logged).toContain('ImageApi.Ambiguous');
  expect(logged).toMatch(/^\s+at /m); // the stack is kept, in the file
}, 180_000);
