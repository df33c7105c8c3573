import { noColor } from '../config/terminal';
import type { BatchProgress } from '../model';
import { progressLine } from './progress-line';

/** Options of {@link ProgressDisplay}. */
export interface ProgressDisplayOptions {
  /** Writes text where the person reads it (standard error). */
  write: (text: string) => void;
  /**
   * The output is a terminal: one line redrawn in place, within its width. Otherwise one plain line per change,
   * at most one every `plainIntervalMs`.
   */
  tty: boolean;
  /**
   * The terminal's width in columns, read at each redraw (a window may be resized).
   * @default process.stderr.columns, or 80 when unknown
   */
  columns?: () => number | undefined;
  /**
   * Colors on a terminal; `NO_COLOR` (any value) turns them off, and a stream that is not a terminal has none.
   * @default on a terminal that has colors, unless `env.NO_COLOR` is set
   */
  color?: boolean;
  /**
   * Where `NO_COLOR` is read.
   * @default the process's environment
   */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * Plain lines (not a terminal): the shortest time between two, unless the batch ended.
   * @default 5000
   */
  plainIntervalMs?: number;
  /** @default Date.now */
  now?: () => number;
}

/** Erases the terminal's current line and puts the cursor at its start (`readline.clearLine` and `cursorTo`). */
const ERASE_LINE = '\r\x1b[2K';
const FALLBACK_COLUMNS = 80;

/**
 * A batch's progress for a person. On a terminal, one line redrawn in place and never wider than the terminal (a
 * wider line wraps, and each redraw leaves the wrapped part behind); lines printed meanwhile ({@link line}) go
 * above it. Elsewhere (a pipe, a CI log), plain lines: one when the counts, the spend or why it waits changed, at
 * most one every few seconds, and the last one always.
 */
export class ProgressDisplay {
  private readonly columns: () => number | undefined;
  private readonly color: boolean;
  private readonly plainIntervalMs: number;
  private readonly now: () => number;
  /** The progress on the terminal's last line, redrawn after a line printed above it. */
  private drawn: string | undefined;
  private lastPlainAt = -Infinity;
  private lastPlainState: string | undefined;
  private pendingPlain: string | undefined;

  constructor(private readonly options: ProgressDisplayOptions) {
    this.columns = options.columns ?? (() => process.stderr.columns);
    this.color = options.tty && !noColor(options.env) && (options.color ?? process.stderr.hasColors?.() ?? false);
    this.plainIntervalMs = options.plainIntervalMs ?? 5000;
    this.now = options.now ?? Date.now;
  }

  /** Shows `p` of a batch of `totalRows` rows. */
  update(p: BatchProgress, totalRows: number): void {
    if (this.options.tty) {
      // One column is kept free: a line that fills the last column leaves some terminals waiting to wrap.
      const columns = Math.max(1, (this.columns() ?? FALLBACK_COLUMNS) - 1);
      this.drawn = progressLine(p, totalRows, { columns, color: this.color });
      this.options.write(`${ERASE_LINE}${this.drawn}`);
      return;
    }
    const text = progressLine(p, totalRows);
    // What a plain line is printed for: the line without its rate and ETA, which change at every update.
    const state = progressLine({ ...p, rowsPerSecond: 0 }, totalRows);
    if (p.done || (state !== this.lastPlainState && this.now() - this.lastPlainAt >= this.plainIntervalMs)) {
      this.options.write(`${text}\n`);
      this.lastPlainAt = this.now();
      this.lastPlainState = state;
      this.pendingPlain = undefined;
    } else this.pendingPlain = state === this.lastPlainState ? undefined : text;
  }

  /** Prints `text` (one or more whole lines) above the progress. */
  line(text: string): void {
    const lines = text.endsWith('\n') ? text : `${text}\n`;
    if (this.drawn === undefined) {
      this.options.write(lines);
      return;
    }
    this.options.write(`${ERASE_LINE}${lines}${this.drawn}`);
  }

  /** Leaves the last progress on screen and ends its line; the next output starts on a line of its own. */
  end(): void {
    if (this.drawn !== undefined) this.options.write('\n');
    else if (this.pendingPlain !== undefined) this.options.write(`${this.pendingPlain}\n`);
    this.drawn = undefined;
    this.pendingPlain = undefined;
  }
}
