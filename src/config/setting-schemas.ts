import { z } from 'zod';
import { FAILED_STATUS } from '../api/contract';
import { RECORD_PATH_SYNTAX, recordPathProblem } from '../api/record-path';

/** The schemas of the service settings (`src/config/service-config.ts`), each from the variable's raw string. */

export const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.string().trim().regex(/^\d+$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(min).max(max));

export const urlPath = z
  .string()
  .trim()
  .regex(/^\/[^\s?#]*$/, 'must be a path starting with "/" (no spaces, query or fragment)');

export const headerName = z
  .string()
  .trim()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be a valid HTTP header name');

export const baseUrl = z
  .string()
  .trim()
  .refine((s) => URL.canParse(s), 'must be an absolute URL such as http://127.0.0.1:8787/api/public/v1')
  .transform((s) => new URL(s))
  .refine((u) => u.protocol === 'http:' || u.protocol === 'https:', 'must use http or https')
  .refine((u) => u.username === '' && u.password === '', 'must not contain credentials')
  .refine((u) => u.search === '' && u.hash === '', 'must not contain a query or fragment')
  .transform((u) => u.toString().replace(/\/+$/, ''));

export const statuses = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((x) => x.trim().toLowerCase())
      .filter((x) => x !== ''),
  )
  .pipe(
    z
      .array(z.string())
      .min(1, 'must list at least one status')
      .refine((xs) => !xs.includes(FAILED_STATUS), `must not contain "${FAILED_STATUS}"`),
  );

export const fieldPaths = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== ''),
  )
  .pipe(
    z
      .array(
        z.string().superRefine((entry, ctx) => {
          const problem = recordPathProblem(entry);
          // The entry itself is not quoted: loadServiceConfig shows the value when it may be shown.
          if (problem) {
            ctx.addIssue({ code: 'custom', message: `each entry must be ${RECORD_PATH_SYNTAX} (an entry ${problem})` });
          }
        }),
      )
      .min(1, 'must list at least one field'),
  );

/** A switch: `on` or `off` (any case), as a boolean. */
export const onOff = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['on', 'off']))
  .transform((v) => v === 'on');
