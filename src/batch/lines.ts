import { createReadStream } from 'node:fs';

const LF = 0x0a;
const CR = 0x0d;
const CHUNK_BYTES = 64 * 1024;

/** One complete line of a file. */
export interface FileLine {
  /** Its bytes, without its line break. */
  bytes: Buffer;
  /** Its physical line number. */
  line: number;
  /** Absolute byte offset of its first byte. */
  start: number;
  /** Absolute byte offset just past its line break (if it has one): where the next line starts. */
  endOffset: number;
  /** False for a last line that ends with the file. */
  hasBreak: boolean;
}

/** Where and how to read a file's lines. */
export interface LineSource {
  path: string;
  /** Absolute byte offset of the first line. */
  start: number;
  /** Physical line number at `start`. */
  line: number;
  /** @default 65536 */
  chunkBytes?: number;
  /** A line longer than this stops the read (see `onTooLarge`). */
  maxRecordBytes: number;
}

/**
 * Reads the lines of a file from `source.start`, breaking at LF, CRLF or a lone CR, and hands each complete line to
 * `onLine` in order until it returns true. A line over `maxRecordBytes` is not kept: `onTooLarge` gets its line
 * number and the read stops. Returns where the file ended (its offset and line), or undefined when stopped.
 */
export async function readLines(
  source: LineSource,
  onLine: (line: FileLine) => boolean,
  onTooLarge: (line: number) => void,
): Promise<{ offset: number; line: number } | undefined> {
  const { maxRecordBytes } = source;
  let parts: Buffer[] = [];
  let length = 0;
  let offset = source.start;
  let line = source.line;
  let pendingCR = false;
  let lineStart = source.start;

  /** The line now complete (`endOffset` past its break, if it has one): true when the read must end. */
  const endLine = (endOffset: number, hasBreak: boolean): boolean => {
    const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts, length);
    const start = lineStart;
    parts = [];
    length = 0;
    lineStart = endOffset;
    const at = line;
    if (hasBreak) line += 1;
    return onLine({ bytes, line: at, start, endOffset, hasBreak });
  };
  const add = (part: Buffer): void => {
    if (part.length === 0) return;
    // A line past the bound is not kept: only its length counts from here.
    if (length <= maxRecordBytes) parts.push(Buffer.from(part));
    length += part.length;
  };
  const tooLarge = (): boolean => {
    if (length <= maxRecordBytes) return false;
    onTooLarge(line);
    return true;
  };

  const stream = createReadStream(source.path, {
    start: source.start,
    highWaterMark: source.chunkBytes ?? CHUNK_BYTES,
  });
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    let from = 0;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (pendingCR) {
        pendingCR = false;
        const end = offset + i + (b === LF ? 1 : 0);
        if (endLine(end, true)) return undefined;
        from = b === LF ? i + 1 : i;
        if (b === LF) continue;
      }
      if (b === LF || b === CR) {
        add(chunk.subarray(from, i));
        if (tooLarge()) return undefined;
        if (b === CR) {
          pendingCR = true;
          from = i + 1;
          continue;
        }
        if (endLine(offset + i + 1, true)) return undefined;
        from = i + 1;
      }
    }
    add(chunk.subarray(from));
    if (tooLarge()) return undefined;
    offset += chunk.length;
  }
  if ((pendingCR || length > 0) && endLine(offset, pendingCR)) return undefined;
  return { offset, line };
}
