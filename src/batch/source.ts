import { open } from 'node:fs/promises';
import type { BatchFormat, FileStamp } from '../model';
import { detectFormat } from './format';
import { type BatchProblem, BatchFileError, BatchFileErrorReason, ProblemCode } from './problems';

export interface BatchSource {
  fingerprint: FileStamp;
  /** Offset of the header: 3 after a UTF-8 byte-order mark, else 0. */
  dataStart: number;
  /** Set when the file is in an encoding this reader does not read (UTF-16 or UTF-32), or is not text at all. */
  encodingProblem?: BatchProblem;
  /** How the file is written, from its name and first bytes (see `detectFormat`). */
  format: BatchFormat;
}

const UTF8_BOM = [0xef, 0xbb, 0xbf] as const;
/** Bytes looked at for the format and for whether the file is text. */
const HEAD_BYTES = 16 * 1024;
/** The part of the head where a NUL byte means the file is not text. */
const NUL_BYTES = 8 * 1024;

/**
 * Why the first bytes of a file are not text, if they are not: a zip archive (an Excel workbook); UTF-16 without its
 * byte-order mark (every other byte NUL); or, in the first 8 KiB, more than 30% of characters that are control
 * characters (NUL among them) or bytes that are not UTF-8 (an image). A stray NUL or a Latin-1 letter in a text file
 * is left to the rows it is in.
 */
export function notTextProblem(head: Buffer): BatchProblem | undefined {
  const problem = (message: string): BatchProblem => ({ code: ProblemCode.NotText, line: 1, message });
  if (head.length >= 4 && head.readUInt32BE(0) === 0x504b0304) {
    return problem('the file is an Excel workbook or another zip archive, not text: save it as CSV UTF-8');
  }
  const sample = head.subarray(0, NUL_BYTES);
  const holdsNul = sample.includes(0);
  const nulMessage =
    'the file is not text (it holds NUL bytes: an image, a spreadsheet (.xlsx) or a UTF-16 file?); ' +
    'save it as CSV (UTF-8)';
  const pairs = Math.floor(sample.length / 2);
  if (holdsNul && pairs >= 4) {
    let even = 0;
    let odd = 0;
    for (let i = 0; i + 1 < sample.length; i += 2) {
      if (sample[i] === 0) even += 1;
      if (sample[i + 1] === 0) odd += 1;
    }
    if (Math.max(even, odd) * 10 >= pairs * 7) return problem(nulMessage);
  }
  let strange = 0;
  let chars = 0;
  for (const ch of sample.toString('utf8')) {
    chars += 1;
    const c = ch.codePointAt(0)!;
    if (c === 0xfffd || (c < 0x20 && c !== 9 && c !== 10 && c !== 12 && c !== 13) || c === 0x7f) strange += 1;
  }
  if (chars >= 16 && strange * 10 > chars * 3) {
    return problem(
      holdsNul
        ? nulMessage
        : 'the file is not text (most of its first bytes are neither UTF-8 nor printable: an image or a ' +
            'spreadsheet?); save it as CSV (UTF-8)',
    );
  }
  return undefined;
}

/**
 * Looks at the first bytes of the file. A UTF-8 byte-order mark (as Excel writes) is skipped by starting the
 * parser after it, so byte offsets stay those of the file. UTF-16/32 marks are refused rather than decoded:
 * the service takes UTF-8, and offsets into a transcoded stream could not be resumed from.
 */
export async function inspectSource(path: string): Promise<BatchSource> {
  let handle;
  try {
    handle = await open(path, 'r');
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error('not a regular file');
    const buffer = Buffer.alloc(HEAD_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, HEAD_BYTES, 0);
    const head = buffer.subarray(0, bytesRead);
    const b = [...head.subarray(0, 4)];
    const fingerprint = { size: stat.size, mtimeMs: stat.mtimeMs };
    const utf16 = (b[0] === 0xff && b[1] === 0xfe) || (b[0] === 0xfe && b[1] === 0xff);
    const utf32 = b[0] === 0 && b[1] === 0 && b[2] === 0xfe && b[3] === 0xff;
    if (utf16 || utf32) {
      const name = utf32 || (b[2] === 0 && b[3] === 0) ? 'UTF-32' : 'UTF-16';
      return {
        fingerprint,
        dataStart: 0,
        format: 'comma',
        encodingProblem: {
          code: ProblemCode.UnsupportedEncoding,
          line: 1,
          message: `the file is ${name} (it starts with a ${name} byte-order mark); save it as UTF-8`,
        },
      };
    }
    // The text after a UTF-8 byte-order mark (none of the marks refused above starts like it).
    const dataStart = b[0] === UTF8_BOM[0] && b[1] === UTF8_BOM[1] && b[2] === UTF8_BOM[2] ? 3 : 0;
    const text = head.subarray(dataStart);
    const encodingProblem = notTextProblem(text);
    return {
      fingerprint,
      dataStart,
      format: detectFormat(path, text),
      ...(encodingProblem ? { encodingProblem } : {}),
    };
  } catch (err) {
    throw new BatchFileError(
      BatchFileErrorReason.Unreadable,
      `cannot read batch file ${path}: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  } finally {
    await handle?.close();
  }
}
