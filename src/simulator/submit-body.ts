import type { IncomingHttpHeaders } from 'node:http';

/** A submit request as the server read it. */
export interface SubmitInput {
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The body was larger than `maxBodyBytes` (only its start was kept). */
  tooLarge: boolean;
}

/** The body as JSON, or the body-level problem the validation step reports. */
export type ParsedBody = { ok: true; value: unknown } | { ok: false; problem: { field: string; message: string } };

/** Content type, size and JSON syntax: the body-level problems, reported at the validation step. */
export function parseBody(input: SubmitInput, maxBytes: number): ParsedBody {
  if (input.tooLarge) return { ok: false, problem: { field: 'body', message: `must be at most ${maxBytes} bytes` } };
  const type = input.headers['content-type'];
  if (!type || !/^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(type)) {
    return { ok: false, problem: { field: 'Content-Type', message: 'must be application/json' } };
  }
  try {
    return { ok: true, value: JSON.parse(input.body.toString('utf8')) as unknown };
  } catch {
    return { ok: false, problem: { field: 'body', message: 'is not valid JSON' } };
  }
}
