import { Transform, type TransformCallback } from 'node:stream';

const LF = 0x0a;
const CR = 0x0d;
const LINE_CONTENT = 1;
const LINE_BLANK = 2;

/**
 * A pass-through stage in front of csv-parse that knows, for every byte, its physical line, and finds bytes
 * that are not UTF-8.
 *
 * Why not csv-parse's own `info.lines`: it counts a CRLF inside a quoted field as two lines, and it gives no
 * line for the start of a record that it skipped after an error. Why not csv-parse's decoding: it replaces
 * invalid bytes with U+FFFD silently. Physical lines do not depend on quoting (a line ends at LF, CRLF or a
 * lone CR, exactly the record delimiters the parser is given), so this stage stays a simple byte loop.
 *
 * Memory: it keeps the start offsets of lines that no query has passed yet. Queries come for every record, the
 * scanner calls `forgetBefore` after each chunk the parser ends between records (blank lines make no record), and
 * this stage runs at most a few stream chunks ahead of the parser, so the window is bounded by the chunk size
 * plus the largest record (`maxRecordBytes`).
 */
export class LineIndex extends Transform {
  /** Absolute offsets of line starts; `starts[i]` is line `firstLine + i`. */
  private starts: number[];
  /** For each entry of `starts`: 0 while its end is unseen, LINE_CONTENT or LINE_BLANK once it is. */
  private kinds: number[] = [0];
  private firstLine: number;
  private head = 0;
  private offset: number;
  private pendingCR = false;
  private lineHasContent = false;
  // UTF-8 decoder state: bytes still expected, the allowed range of the next one, the line of the lead byte.
  private need = 0;
  private lo = 0x80;
  private hi = 0xbf;
  private seqLine = 0;
  /** Lines holding invalid UTF-8, in order, each once; drained by `takeInvalidLines`. */
  private invalid: number[] = [];
  private lastByteLine: number;

  /** @param startOffset absolute offset of the first byte this stage will see; it must begin a line. */
  constructor(startOffset: number, startLine: number) {
    super();
    this.offset = startOffset;
    this.starts = [startOffset];
    this.firstLine = startLine;
    this.lastByteLine = startLine;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.scan(chunk);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.pendingCR) this.endLine(this.offset);
    this.pendingCR = false;
    if (this.need > 0) this.markInvalid(this.seqLine);
    this.need = 0;
    callback();
  }

  private get currentLine(): number {
    return this.firstLine + this.starts.length - 1;
  }

  private endLine(nextStart: number): void {
    this.kinds[this.kinds.length - 1] = this.lineHasContent ? LINE_CONTENT : LINE_BLANK;
    this.starts.push(nextStart);
    this.kinds.push(0);
    this.lineHasContent = false;
  }

  private markInvalid(line: number): void {
    if (this.invalid[this.invalid.length - 1] !== line) this.invalid.push(line);
  }

  private scan(chunk: Buffer): void {
    const base = this.offset;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (this.pendingCR) {
        this.pendingCR = false;
        if (b !== LF) this.endLine(base + i);
      }
      if (this.need > 0 || b >= 0x80) this.utf8(b);
      if (b === LF) this.endLine(base + i + 1);
      else if (b === CR) this.pendingCR = true;
      else this.lineHasContent = true;
    }
    this.offset = base + chunk.length;
    if (chunk.length > 0) this.lastByteLine = chunk[chunk.length - 1] === LF ? this.currentLine - 1 : this.currentLine;
  }

  /** Absolute offset just past the last byte seen. */
  get position(): number {
    return this.offset;
  }

  /** Line of the last byte seen (the start line when nothing was read). */
  get lastLine(): number {
    return this.lastByteLine;
  }

  /** One step of a strict UTF-8 decoder (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). */
  private utf8(b: number): void {
    if (this.need > 0) {
      if (b >= this.lo && b <= this.hi) {
        this.need -= 1;
        this.lo = 0x80;
        this.hi = 0xbf;
        return;
      }
      // Truncated sequence: it is invalid, and `b` starts afresh.
      this.markInvalid(this.seqLine);
      this.need = 0;
      this.lo = 0x80;
      this.hi = 0xbf;
      if (b < 0x80) return;
    }
    this.seqLine = this.currentLine;
    if (b >= 0xc2 && b <= 0xdf) this.need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      this.need = 2;
      if (b === 0xe0) this.lo = 0xa0;
      else if (b === 0xed) this.hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      this.need = 3;
      if (b === 0xf0) this.lo = 0x90;
      else if (b === 0xf4) this.hi = 0x8f;
    } else this.markInvalid(this.currentLine);
  }

  /** Index into `starts` of the line holding absolute byte `offset`; moves forward only. */
  private seek(offset: number): number {
    while (this.head + 1 < this.starts.length && this.starts[this.head + 1]! <= offset) this.head += 1;
    // Compacts once the forgotten lines are at least half the arrays: amortised constant time per line, even
    // when this stage runs a few chunks (hundreds of thousands of short lines) ahead of the queries.
    if (this.head > 4096 && this.head * 2 >= this.starts.length) {
      this.starts.splice(0, this.head);
      this.kinds.splice(0, this.head);
      this.firstLine += this.head;
      this.head = 0;
    }
    return this.head;
  }

  /**
   * The physical line of an absolute byte offset. Queries must not go backwards (the scanner asks in file
   * order), which is what lets the index forget lines behind them.
   */
  lineOf(offset: number): number {
    // Seek first: it may compact, moving `firstLine` on (read before it, the line was off by the lines forgotten).
    const index = this.seek(offset);
    return this.firstLine + index;
  }

  /**
   * Forgets the lines before the one holding byte `offset - 1`. The scanner calls it when the parser has consumed
   * everything before `offset` and holds no partial record: every line before is then part of a record already
   * asked about, or blank. Why: the parser skips blank lines without a record, hence without a query, so a file of
   * 50 MB of line breaks would otherwise keep 50 million line starts here (gigabytes). After this, `lineOf` must
   * not be asked about an offset below `offset`; `recordLineFrom` may be, since it skips blank lines forward.
   */
  forgetBefore(offset: number): void {
    if (offset > this.starts[0]!) this.seek(offset - 1);
  }

  /**
   * The first line at or after `offset` that is not blank: where the record beginning at a record boundary
   * really starts, since the parser skips blank lines before it.
   */
  recordLineFrom(offset: number): number {
    let i = this.seek(offset);
    while (this.kinds[i] === LINE_BLANK && i + 1 < this.starts.length) i += 1;
    return this.firstLine + i;
  }

  /** Lines (up to and including `line`) found to hold invalid UTF-8, removed from the queue. */
  takeInvalidLines(line = Number.POSITIVE_INFINITY): number[] {
    let n = 0;
    while (n < this.invalid.length && this.invalid[n]! <= line) n += 1;
    return n === 0 ? [] : this.invalid.splice(0, n);
  }
}
