import { z } from 'zod';
import { DEFAULT_IDEMPOTENCY_HEADER, type StatusNamingName } from '../api/contract';
import { BODY_PATH } from '../api/request-shape';
import {
  accountSchema,
  DEMO_ACCOUNT_ID,
  DEMO_API_KEY,
  DEMO_KEY_ID,
  resolveAccounts,
  type AccountConfig,
} from './config-accounts';
import { faultSettingsSchema, scriptRuleSchema } from './config-faults';
import { generationIssues, generationSchema, rangeSchema } from './config-generation';
import { catalogSchema, pricingSchema, recordsSchema, requestLayoutSchema } from './config-presentation';
import { filesConfigSchema } from './files-config';
import { ErrorCode, ImagebatchError } from '../model/errors';
import { type Clock } from './clock';
import { type ScriptRule } from './faults';

export {
  DEMO_ACCOUNT_ID,
  DEMO_API_KEY,
  DEMO_KEY_ID,
  hashApiKey,
  type AccountConfig,
  type KeyConfig,
} from './config-accounts';
export { faultSchema, faultSettingsSchema, scriptRuleSchema } from './config-faults';
export { GenerationShape } from './config-generation';

/**
 * The simulator's configuration: every default is the one contract-defaults.md fixes. Validated with zod so that a
 * wrong config file says which field is wrong; plaintext keys are hashed at load and then dropped, so the
 * running simulator, like the real service, only ever holds hashes.
 */

/** Idempotency storage variants of contract-defaults.md: (a) only 202s are stored, (b) every judged response is. */
export const IdempotencyVariant = {
  AcceptedOnly: 'accepted-only',
  AllJudged: 'all-judged',
} as const;
export type IdempotencyVariant = (typeof IdempotencyVariant)[keyof typeof IdempotencyVariant];

const usd = z.number().finite().nonnegative();
const positiveInt = z.number().int().positive();
const probability = z.number().min(0).max(1);
const modelSchema = z.strictObject({
  id: z.string().min(1),
  name: z.string().min(1),
  /** What a creation of the model is charged, per image. */
  price_usd: usd,
  /** What the catalog shows, when it is not what is charged (a stale catalog). @default price_usd */
  listed_price_usd: usd.optional(),
});

export const limitsSchema = z.strictObject({
  /** Token bucket per key: refill rate. */
  requestsPerSecond: z.number().positive().default(10),
  /** Token bucket per key: capacity. */
  burst: positiveInt.default(10),
  /** Minimum interval between polls of one creation. */
  minPollIntervalMs: z.number().int().nonnegative().default(2000),
  /** Every 200 to a poll of a creation still in flight says `Retry-After`: the minimum interval, in whole seconds. @default false */
  inFlightRetryAfter: z.boolean().optional(),
  /** Creations in flight per account; null = off. */
  accountConcurrency: positiveInt.nullable().default(8),
  /** Creations in flight per model, across accounts; null = off. */
  modelCapacity: positiveInt.nullable().default(null),
});

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
    pricing: pricingSchema,
    catalog: catalogSchema,
    requestLayout: requestLayoutSchema,
    records: recordsSchema,
    /** How the files port serves images: see `src/simulator/files-config.ts`. */
    files: filesConfigSchema,
    idempotency: z
      .strictObject({
        variant: z.enum([IdempotencyVariant.AcceptedOnly, IdempotencyVariant.AllJudged]).default('accepted-only'),
        ttlMs: positiveInt.default(24 * 3600 * 1000),
        maxEntries: positiveInt.default(100_000),
        /**
         * The header the key is read from; null: none (with no `field` either, the service honours no key: every
         * submission is judged as new). See `src/simulator/key-carrier.ts`.
         */
        header: z
          .string()
          .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name')
          .nullable()
          .default(DEFAULT_IDEMPOTENCY_HEADER),
        /** A dotted body path the key is read from instead of any header (`idempotency_key`, `meta.key`). */
        field: z.string().regex(BODY_PATH, 'must be a name or a dotted path').optional(),
      })
      .prefault({}),
    creations: z
      .strictObject({ ttlMs: positiveInt.default(24 * 3600 * 1000), maxEntries: positiveInt.default(100_000) })
      .prefault({}),
    generation: generationSchema,
    /**
     * Reads that lag writes (a store that has not caught up): a GET of a creation younger than its lag, drawn per
     * creation in this range, answers 404 ERR_NOT_FOUND. See `src/simulator/read-lag.ts`. @default none
     */
    readLagMs: rangeSchema.optional(),
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
    /**
     * How long the answer to a poll takes after the creation was read (and its poll counted): a service behind a
     * distributed store. @default 0
     */
    pollLatencyMs: z.number().int().nonnegative().max(60_000).optional(),
    /** Request bodies above this many bytes get 400 ERR_INVALID_REQUEST. */
    maxBodyBytes: positiveInt.default(64 * 1024),
    topUpUrl: z.string().default('https://portal.imagegen.example/billing/top-up'),
    /** The charge book (`GET /_sim/ledger`): entries kept at most (the key keeps its first name, for config files). */
    ledger: z.strictObject({ maxEntries: positiveInt.default(1_000_000) }).prefault({}),
    /** Real-time sweeper that settles finished creations and expires old state; 0 = off. */
    sweepIntervalMs: z.number().int().nonnegative().default(250),
    /**
     * JSON file the state (creations, stored idempotent responses, wallets and spending, the charge book, run-time
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
    generationIssues(cfg.generation, modelIds, (path, message) => ctx.addIssue({ code: 'custom', path, message }));
  });

/** What a caller may pass: the JSON-able config plus an injectable clock. */
export type SimulatorConfigInput = z.input<typeof simulatorConfigSchema> & {
  /** @default the system clock (Date.now) */
  clock?: Clock;
};

type ParsedConfig = z.output<typeof simulatorConfigSchema>;

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
    accounts: resolveAccounts(cfg.accounts, allModels),
  };
}
