import { createHash } from 'node:crypto';
import { z } from 'zod';
import { API_KEY_TAIL, SIMULATOR_KEY_PREFIX, type StatusNamingName } from '../api/contract';
import { BODY_PATH, REQUEST_SOURCES } from '../api/request-shape';
import { filesConfigSchema } from './files-config';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { type Clock } from './clock';
import { FaultKind, PROBABILISTIC_FAULTS, type Fault, type ScriptRule } from './faults';

/**
 * The simulator's configuration: every default is the one contract-defaults.md fixes. Validated with zod so that a
 * wrong config file says which field is wrong; plaintext keys are hashed at load and then dropped, so the
 * running simulator, like the real service, only ever holds hashes.
 */

/** The well-known key of the default account, for the demo and for tests. Simulator format only. */
export const DEMO_API_KEY = `${SIMULATOR_KEY_PREFIX}live_DemoKey0ImageBatch0Simulator000000000000`;
export const DEMO_ACCOUNT_ID = 'acct_demo';
export const DEMO_KEY_ID = 'key_demo';

/** Idempotency storage variants of contract-defaults.md: (a) only 202s are stored, (b) every judged response is. */
export const IdempotencyVariant = {
  AcceptedOnly: 'accepted-only',
  AllJudged: 'all-judged',
} as const;
export type IdempotencyVariant = (typeof IdempotencyVariant)[keyof typeof IdempotencyVariant];

/** sha256 hex of a key: the only form in which the simulator keeps keys. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

const usd = z.number().finite().nonnegative();
const positiveInt = z.number().int().positive();
const probability = z.number().min(0).max(1);
const KEY_FORMAT = new RegExp(`^[A-Za-z0-9]*_?${API_KEY_TAIL.source}`);

const keySchema = z
  .strictObject({
    /** Key id: what the ledger and usage records show instead of the key. */
    id: z.string().min(1),
    /** Plaintext key: hashed at load, then dropped. */
    key: z.string().regex(KEY_FORMAT, 'must look like <prefix>live_<40 characters [A-Za-z0-9]>').optional(),
    /** sha256 hex of the key, for configs that should not hold the key itself. */
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex characters')
      .optional(),
    revoked: z.boolean().default(false),
    /** Per-key monthly budget in USD (net of refunds, per calendar month in UTC); null = off. */
    monthlyBudgetUsd: usd.nullable().default(null),
  })
  .refine((k) => (k.key === undefined) !== (k.sha256 === undefined), {
    message: 'give exactly one of "key" and "sha256"',
  });

const accountSchema = z.strictObject({
  id: z.string().min(1),
  disabled: z.boolean().default(false),
  walletUsd: usd.default(100),
  /** Model ids of the catalog this account may use; all of them when absent. */
  models: z.array(z.string().min(1)).optional(),
  keys: z.array(keySchema).min(1),
});

const modelSchema = z.strictObject({
  id: z.string().min(1),
  name: z.string().min(1),
  /** What a creation of the model is charged, per image. */
  price_usd: usd,
  /** What the catalog shows, when it is not what is charged (a stale catalog). @default price_usd */
  listed_price_usd: usd.optional(),
});

const rangeSchema = z
  .strictObject({ minMs: z.number().int().nonnegative(), maxMs: z.number().int().nonnegative() })
  .refine((r) => r.minMs <= r.maxMs, { message: 'minMs must not exceed maxMs' });

/**
 * How a creation's running time is drawn: 'uniform' in `runningMs`, or 'lognormal':
 * exp(ln(medianMs) + sigma * N(0, 1)) rounded and clipped to `runningMs` (a long tail, as real services show).
 */
export const GenerationShape = { Uniform: 'uniform', Lognormal: 'lognormal' } as const;
export type GenerationShape = (typeof GenerationShape)[keyof typeof GenerationShape];
const generationShapeSchema = z.enum([GenerationShape.Uniform, GenerationShape.Lognormal]);
const medianSchema = z.number().finite().positive();
const sigmaSchema = z.number().finite().nonnegative();

const faultKinds = Object.values(FaultKind) as [FaultKind, ...FaultKind[]];
/** A fault in a script: its kind as a string, or `{ kind, delayMs }`. */
export const faultSchema = z.union([
  z.enum(faultKinds).transform((kind): Fault => ({ kind })),
  z.strictObject({ kind: z.enum(faultKinds), delayMs: z.number().int().nonnegative().optional() }),
]);
export const scriptRuleSchema = z.strictObject({ match: z.string().min(1), faults: z.array(faultSchema) });

const probabilitiesSchema = z
  .strictObject(Object.fromEntries(PROBABILISTIC_FAULTS.map((k) => [k, probability.optional()])))
  .refine((p) => Object.values(p).reduce<number>((sum, v) => sum + (v ?? 0), 0) <= 1, {
    message: 'the probabilities must add up to at most 1',
  });

export const faultSettingsSchema = z.strictObject({
  probabilities: probabilitiesSchema.prefault({}),
  slow: z
    .strictObject({ probability: probability.default(0), delayMs: z.number().int().nonnegative().default(1500) })
    .prefault({}),
  providerRetryAfterSeconds: positiveInt.default(2),
});

export const limitsSchema = z.strictObject({
  /** Token bucket per key: refill rate. */
  requestsPerSecond: z.number().positive().default(10),
  /** Token bucket per key: capacity. */
  burst: positiveInt.default(10),
  /** Minimum interval between polls of one creation. */
  minPollIntervalMs: z.number().int().nonnegative().default(2000),
  /** Creations in flight per account; null = off. */
  accountConcurrency: positiveInt.nullable().default(8),
  /** Creations in flight per model, across accounts; null = off. */
  modelCapacity: positiveInt.nullable().default(null),
});

/** The fields a creation record may have besides its status (contract-defaults.md, "The creation record", and the shapes' own). */
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
]);

/** The fields a model of the catalog may have besides its id. */
const MODEL_FIELDS: ReadonlySet<string> = new Set(['id', 'name', 'price_usd', 'listed_price_usd', 'pricing']);

const DEFAULT_MODELS = [
  { id: 'flux-dev', name: 'Flux Dev', price_usd: 0.04 },
  { id: 'flux-schnell', name: 'Flux Schnell', price_usd: 0.01 },
  { id: 'sdxl', name: 'Stable Diffusion XL', price_usd: 0.02 },
];

export const simulatorConfigSchema = z
  .strictObject({
    host: z.string().default('127.0.0.1'),
    /** API port; 0 lets the OS pick. */
    port: z.number().int().min(0).max(65535).default(0),
    /** Image file port; 0 lets the OS pick. */
    filesPort: z.number().int().min(0).max(65535).default(0),
    seed: z.number().int().default(1),
    models: z.array(modelSchema).min(1).default(DEFAULT_MODELS),
    accounts: z
      .array(accountSchema)
      .min(1)
      .prefault([{ id: DEMO_ACCOUNT_ID, keys: [{ id: DEMO_KEY_ID, key: DEMO_API_KEY }] }]),
    limits: limitsSchema.prefault({}),
    statusNaming: z.enum(['default', 'alternate']).default('default'),
    /** How prices appear in the HTTP bodies (the real interface shows none); charging is the same in every mode. */
    pricing: z
      .strictObject({
        /**
         * 'default' (contract-defaults.md: creation `cost_usd`, model `price_usd`), 'renamed' (other names, nested), 'amount'
         * (`cost` and `price` as `{ "amount": "0.04", "currency": "USD" }`), 'hidden' (none).
         */
        fields: z.enum(['default', 'renamed', 'amount', 'hidden']).default('default'),
        /** 'always' (the 202 and every GET), or 'poll-only' (never on a 202 or its replay, only on GET /creations/{id}). */
        costOn: z.enum(['always', 'poll-only']).default('always'),
      })
      .prefault({}),
    /** How `GET /models` shows the catalog (the interface does not show its fields). */
    catalog: z
      .strictObject({
        /** The field that carries a model's id (`slug`, `model_id`...): a plain name no other field of a model has. */
        idField: z
          .string()
          .regex(/^[A-Za-z_$][A-Za-z0-9_$-]{0,63}$/, 'must be a plain field name such as slug')
          .refine((name) => !MODEL_FIELDS.has(name) || name === 'id', 'is already a field of a model')
          .default('id'),
      })
      .prefault({}),
    /**
     * Where the submit body's fields are (the interface does not show them). Default: contract-defaults.md's flat body, and any
     * other field is rejected. `fields` moves a field to another name or a dotted path (`{ "prompt": "input.text" }`);
     * `extraFields` are fields besides them, by dotted path, that are accepted (`optional`) or demanded (`required`:
     * a 400 without it), such as the ones `IMAGEGEN_REQUEST_TEMPLATE` and `--column` add. Any other field is still
     * rejected.
     */
    requestLayout: z
      .strictObject({
        fields: z
          .partialRecord(z.enum(REQUEST_SOURCES), z.string().regex(BODY_PATH, 'must be a name or a dotted path'))
          .default({}),
        extraFields: z
          .record(z.string().regex(BODY_PATH, 'must be a name or a dotted path'), z.enum(['required', 'optional']))
          .default({}),
      })
      .prefault({}),
    /**
     * How a creation record shows its images and its status (the interface shows neither field's name); what is
     * stored, charged and replayed is the same in every mode. See `src/simulator/record-shape.ts`.
     */
    records: z
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
      })
      .prefault({}),
    /** How the files port serves images: see `src/simulator/files-config.ts`. */
    files: filesConfigSchema,
    idempotency: z
      .strictObject({
        variant: z.enum([IdempotencyVariant.AcceptedOnly, IdempotencyVariant.AllJudged]).default('accepted-only'),
        ttlMs: positiveInt.default(24 * 3600 * 1000),
        maxEntries: positiveInt.default(100_000),
      })
      .prefault({}),
    creations: z
      .strictObject({ ttlMs: positiveInt.default(24 * 3600 * 1000), maxEntries: positiveInt.default(100_000) })
      .prefault({}),
    /**
     * Time a creation waits queued (uniform in `queuedMs`), then runs (`runningMs`, drawn in the `shape`), each
     * from the creation's own seeded stream; `models` gives a model timing of its own.
     */
    generation: z
      .strictObject({
        /** @default { minMs: 200, maxMs: 800 } */
        queuedMs: rangeSchema.default({ minMs: 200, maxMs: 800 }),
        /**
         * The running time's range: its bounds when uniform, its clip when log-normal.
         * @default { minMs: 1000, maxMs: 4000 }
         */
        runningMs: rangeSchema.default({ minMs: 1000, maxMs: 4000 }),
        /** @default 'uniform' */
        shape: generationShapeSchema.default(GenerationShape.Uniform),
        /** Median running time when log-normal; within `runningMs`. @default the geometric middle of `runningMs` */
        medianMs: medianSchema.optional(),
        /** Standard deviation of ln(running time) when log-normal. @default 0.75 */
        sigma: sigmaSchema.default(0.75),
        /**
         * Per model id (of `models`), any of the fields above; the others come from the general ones, except that a
         * model with a `runningMs` of its own and no `medianMs` gets the geometric middle of its own range.
         * @default {}
         */
        models: z
          .record(
            z.string().min(1),
            z.strictObject({
              queuedMs: rangeSchema.optional(),
              runningMs: rangeSchema.optional(),
              shape: generationShapeSchema.optional(),
              medianMs: medianSchema.optional(),
              sigma: sigmaSchema.optional(),
            }),
          )
          .default({}),
      })
      .prefault({}),
    safety: z
      .strictObject({
        /** Case-insensitive words whose presence in the prompt makes the safety filter decline it. */
        triggerWords: z.array(z.string().min(1)).default(['[unsafe]', 'nsfw']),
        /** Chance that a generic prompt of one or two words is declined. */
        genericDeclineProbability: probability.default(0.5),
      })
      .prefault({}),
    faults: faultSettingsSchema.prefault({}),
    scripts: z.array(scriptRuleSchema).default([]),
    /** Request bodies above this many bytes get 400 ERR_INVALID_REQUEST. */
    maxBodyBytes: positiveInt.default(64 * 1024),
    topUpUrl: z.string().default('https://portal.imagegen.example/billing/top-up'),
    ledger: z.strictObject({ maxEntries: positiveInt.default(1_000_000) }).prefault({}),
    /** Real-time sweeper that settles finished creations and expires old state; 0 = off. */
    sweepIntervalMs: z.number().int().nonnegative().default(250),
    /**
     * JSON file the state (creations, stored idempotent responses, wallets and spending, the ledger, run-time
     * key and account changes, consumed fault scripts) is loaded from at start and saved to on close, on
     * `saveState()` and every few seconds while it changes; absent = nothing persists.
     */
    stateFile: z.string().min(1).optional(),
  })
  .superRefine((cfg, ctx) => {
    const modelIds = new Set(cfg.models.map((m) => m.id));
    const accountIds = new Set<string>();
    const keyIds = new Set<string>();
    cfg.accounts.forEach((account, a) => {
      if (accountIds.has(account.id))
        ctx.addIssue({ code: 'custom', path: ['accounts', a, 'id'], message: 'duplicate account id' });
      accountIds.add(account.id);
      account.models?.forEach((id, m) => {
        if (!modelIds.has(id))
          ctx.addIssue({ code: 'custom', path: ['accounts', a, 'models', m], message: `unknown model "${id}"` });
      });
      account.keys.forEach((key, k) => {
        if (keyIds.has(key.id))
          ctx.addIssue({ code: 'custom', path: ['accounts', a, 'keys', k, 'id'], message: 'duplicate key id' });
        keyIds.add(key.id);
      });
    });
    const { generation } = cfg;
    const checkMedian = (medianMs: number | undefined, range: { minMs: number; maxMs: number }, at: string[]) => {
      if (medianMs !== undefined && (medianMs < range.minMs || medianMs > range.maxMs))
        ctx.addIssue({
          code: 'custom',
          path: ['generation', ...at, 'medianMs'],
          message: `must lie within runningMs [${range.minMs}, ${range.maxMs}]`,
        });
    };
    checkMedian(generation.medianMs, generation.runningMs, []);
    for (const [id, timing] of Object.entries(generation.models)) {
      if (!modelIds.has(id))
        ctx.addIssue({ code: 'custom', path: ['generation', 'models', id], message: `unknown model "${id}"` });
      checkMedian(timing.medianMs, timing.runningMs ?? generation.runningMs, ['models', id]);
    }
  });

/** What a caller may pass: the JSON-able config plus an injectable clock. */
export type SimulatorConfigInput = z.input<typeof simulatorConfigSchema> & {
  /** @default the system clock (Date.now) */
  clock?: Clock;
};

type ParsedConfig = z.output<typeof simulatorConfigSchema>;

export interface KeyConfig {
  id: string;
  sha256: string;
  revoked: boolean;
  monthlyBudgetUsd: number | null;
}
export interface AccountConfig {
  id: string;
  disabled: boolean;
  walletUsd: number;
  models: string[];
  keys: KeyConfig[];
}
export type SimulatorConfig = Omit<ParsedConfig, 'accounts' | 'scripts' | 'statusNaming'> & {
  accounts: AccountConfig[];
  scripts: ScriptRule[];
  statusNaming: StatusNamingName;
  clock: Clock;
};

/** A config (or state file) that failed validation; `issues` name each field as a dotted path. */
export class SimulatorConfigError extends ImagebatchError {
  readonly code = ErrorCode.SimulatorConfigInvalid;
  constructor(
    readonly issues: readonly string[],
    heading = 'invalid simulator config',
  ) {
    super(`${heading}:\n  ${issues.join('\n  ')}`);
  }
}

/** Formats zod issues as `path.to.field: message`. */
export function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(root)'}: ${issue.message}`);
}

/** Validates, applies defaults, hashes plaintext keys (and drops them). */
export function resolveConfig(input: SimulatorConfigInput = {}): SimulatorConfig {
  const { clock, ...rest } = input;
  const parsed = simulatorConfigSchema.safeParse(rest);
  if (!parsed.success) throw new SimulatorConfigError(describeIssues(parsed.error));
  const cfg = parsed.data;
  const allModels = cfg.models.map((m) => m.id);
  return {
    ...cfg,
    clock: clock ?? { now: () => Date.now() },
    accounts: cfg.accounts.map((account) => ({
      id: account.id,
      disabled: account.disabled,
      walletUsd: account.walletUsd,
      models: account.models ?? allModels,
      keys: account.keys.map((key) => ({
        id: key.id,
        sha256: key.sha256 ?? hashApiKey(key.key ?? ''),
        revoked: key.revoked,
        monthlyBudgetUsd: key.monthlyBudgetUsd,
      })),
    })),
  };
}
