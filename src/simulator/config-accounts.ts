import { createHash } from 'node:crypto';
import { z } from 'zod';
import { API_KEY_TAIL, SIMULATOR_KEY_PREFIX } from '../api/contract';

/** The simulator's accounts and keys, as the config gives them and as the running simulator holds them. */

/** The well-known key of the default account, for the demo and for tests. Simulator format only. */
export const DEMO_API_KEY = `${SIMULATOR_KEY_PREFIX}live_DemoKey0ImageBatch0Simulator000000000000`;
export const DEMO_ACCOUNT_ID = 'acct_demo';
export const DEMO_KEY_ID = 'key_demo';

/** sha256 hex of a key: the only form in which the simulator keeps keys. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

const usd = z.number().finite().nonnegative();
const KEY_FORMAT = new RegExp(`^[A-Za-z0-9]*_?${API_KEY_TAIL.source}`);

const keySchema = z
  .strictObject({
    /** Key id: what the charge book and usage records show instead of the key. */
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

export const accountSchema = z.strictObject({
  id: z.string().min(1),
  disabled: z.boolean().default(false),
  walletUsd: usd.default(100),
  /** Model ids of the catalog this account may use; all of them when absent. */
  models: z.array(z.string().min(1)).optional(),
  keys: z.array(keySchema).min(1),
});

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

/** The accounts as the running simulator holds them: keys hashed (plaintext dropped), models filled in. */
export function resolveAccounts(
  accounts: readonly z.output<typeof accountSchema>[],
  allModels: string[],
): AccountConfig[] {
  return accounts.map((account) => ({
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
  }));
}
