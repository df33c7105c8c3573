import { z } from 'zod';
import { BODY_PATH, REQUEST_SOURCES } from '../api/request-shape';

/**
 * How the simulator's HTTP bodies show what the interface leaves open (prices, the catalog's id field, the submit
 * body's layout, a creation record's images and status). What is stored, charged and replayed is the same in every
 * mode.
 */

/** The fields a creation record may have besides its status (contract-defaults.md "Creation record", and the shapes' own). */
const RECORD_FIELDS: ReadonlySet<string> = new Set([
  'id',
  'status',
  'model',
  'prompt',
  'negative_prompt',
  'width',
  'height',
  'num_images',
  'seed',
  'created_at',
  'updated_at',
  'cost_usd',
  'charge',
  'images',
  'error',
  'result',
  'data',
  'cost',
  'links',
  'urls',
  'logs',
]);

/** The fields a model of the catalog may have besides its id. */
const MODEL_FIELDS: ReadonlySet<string> = new Set(['id', 'name', 'price_usd', 'listed_price_usd', 'pricing']);

/** How prices appear in the HTTP bodies (the real interface shows none); charging is the same in every mode. */
export const pricingSchema = z
  .strictObject({
    /**
     * 'default' (contract-defaults.md: creation `cost_usd`, model `price_usd`), 'renamed' (other names, nested), 'amount'
     * (`cost` and `price` as `{ "amount": "0.04", "currency": "USD" }`), 'hidden' (none).
     */
    fields: z.enum(['default', 'renamed', 'amount', 'hidden']).default('default'),
    /** 'always' (the 202 and every GET), or 'poll-only' (never on a 202 or its replay, only on GET /creations/{id}). */
    costOn: z.enum(['always', 'poll-only']).default('always'),
  })
  .prefault({});

/** How `GET /models` shows the catalog (the interface does not show its fields). */
export const catalogSchema = z
  .strictObject({
    /** The field that carries a model's id (`slug`, `model_id`...): a plain name no other field of a model has. */
    idField: z
      .string()
      .regex(/^[A-Za-z_$][A-Za-z0-9_$-]{0,63}$/, 'must be a plain field name such as slug')
      .refine((name) => !MODEL_FIELDS.has(name) || name === 'id', 'is already a field of a model')
      .default('id'),
  })
  .prefault({});

/**
 * Where the submit body's fields are (the interface does not show them). Default: contract-defaults.md's flat body, and any
 * other field is rejected. `fields` moves a field to another name or a dotted path (`{ "prompt": "input.text" }`);
 * `extraFields` are fields besides them, by dotted path, that are accepted (`optional`) or demanded (`required`:
 * a 400 without it), such as the ones `IMAGEGEN_REQUEST_TEMPLATE` and `--column` add. Any other field is still
 * rejected.
 */
export const requestLayoutSchema = z
  .strictObject({
    fields: z
      .partialRecord(z.enum(REQUEST_SOURCES), z.string().regex(BODY_PATH, 'must be a name or a dotted path'))
      .default({}),
    extraFields: z
      .record(z.string().regex(BODY_PATH, 'must be a name or a dotted path'), z.enum(['required', 'optional']))
      .default({}),
  })
  .prefault({});

/**
 * How a creation record shows its images and its status (the interface shows neither field's name); what is
 * stored, charged and replayed is the same in every mode. See `src/simulator/record-shape.ts`.
 */
export const recordsSchema = z
  .strictObject({
    /**
     * 'default' (contract-defaults.md: `images[].url`), 'nested' (`result.files[].href`), 'inline-base64' (`data[].b64_json`
     * holding the PNG bytes), 'data-uri' (`images[].url` as `data:image/png;base64,...`), 'none' (a success
     * that shows no image at all), 'queue' (`result.artifact_location`, beside a web page's link `links.web`).
     */
    imageShape: z.enum(['default', 'nested', 'inline-base64', 'data-uri', 'none', 'queue']).default('default'),
    /** 'none' (the record at the root) or 'data' (every record, a 202's too, wrapped as `{ "data": record }`). */
    envelope: z.enum(['none', 'data']).default('none'),
    /** The field that carries the status (`state`, `job_status`...): a plain name no other field of a record has. */
    statusField: z
      .string()
      .regex(/^[A-Za-z_$][A-Za-z0-9_$-]{0,63}$/, 'must be a plain field name such as state')
      .refine((name) => !RECORD_FIELDS.has(name) || name === 'status', 'is already a field of a creation record')
      .default('status'),
    /** The status word of a succeeded creation (`COMPLETED_OK`), instead of the status naming's. */
    succeededStatus: z
      .string()
      .regex(/^[A-Za-z][A-Za-z0-9_ -]{0,31}$/, 'must be a word such as COMPLETED_OK')
      .refine((word) => word.toLowerCase() !== 'failed', 'must not be "failed"')
      .optional(),
    /**
     * A status that passes between running and success (`uploading`), shown over the last `lastMs` of a creation's
     * running time (all of it when it runs shorter). See `src/simulator/record-extras.ts`.
     */
    passingStatus: z
      .strictObject({
        word: z
          .string()
          .regex(/^[A-Za-z][A-Za-z0-9_ -]{0,31}$/, 'must be a word such as uploading')
          .refine((word) => word.toLowerCase() !== 'failed', 'must not be "failed"'),
        lastMs: z.number().int().positive(),
      })
      .optional(),
    /** Every polled record carries the API's own links (`urls.get`, `urls.cancel`) and a logs URL (`logs`). @default false */
    links: z.boolean().optional(),
  })
  .prefault({});
