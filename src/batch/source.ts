import { open } from 'node:fs/promises';
import type { FileStamp } from '../model';
import { type BatchProblem, BatchFileError, BatchFileErrorReason, ProblemCode } from './problems';

export interface BatchSource {
  fingerprint: FileStamp;
  /** Offset of the header: 3 after a UTF-8 byte-order mark, else 0. */
  dataStart: number;
  /** Set when the file is in an encoding this reader does not read (UTF-16 or UTF-32). */
  encodingProblem?: BatchProblem;
}

const UTF8_BOM = [0xef, 0xbb, 0xbf] as const;

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
    const head = Buffer.alloc(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    const b = [...head.subarray(0, bytesRead)];
    const fingerprint = { size: stat.size, mtimeMs: stat.mtimeMs };
    if (b[0] === UTF8_BOM[0] && b[1] === UTF8_BOM[1] && b[2] === UTF8_BOM[2]) return { fingerprint, dataStart: 3 };
    const utf16 = (b[0] === 0xff && b[1] === 0xfe) || (b[0] === 0xfe && b[1] === 0xff);
    const utf32 = b[0] === 0 && b[1] === 0 && b[2] === 0xfe && b[3] === 0xff;
    if (utf16 || utf32) {
      const name = utf32 || (b[2] === 0 && b[3] === 0) ? 'UTF-32' : 'UTF-16';
      return {
        fingerprint,
        dataStart: 0,
        encodingProblem: {
          code: ProblemCode.UnsupportedEncoding,
          line: 1,
          message: `the file is ${name} (it starts with a ${name} byte-order mark); save it as UTF-8`,
        },
      };
    }
    return { fingerprint, dataStart: 0 };
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
