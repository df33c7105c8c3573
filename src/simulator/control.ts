import { z } from 'zod';
import { type StatusNamingName } from '../api/contract';
import {
  IdempotencyVariant,
  describeIssues,
  faultSchema,
  faultSettingsSchema,
  hashApiKey,
  SimulatorConfigError,
} from './config';
import { type SimulatorEngine } from './engine';
import { type Fault, type FaultKind, type FaultSettings } from './faults';

/**
 * Run-time controls of the simulator (not part of the service): the same commands in process
 * (`sim.control(...)` and the helpers built on it) and over HTTP (`POST /_sim/control`).
 */

const limitsPatchSchema = z.strictObject({
  requestsPerSecond: z.number().positive().optional(),
  burst: z.number().int().positive().optional(),
  minPollIntervalMs: z.number().int().nonnegative().optional(),
  accountConcurrency: z.number().int().positive().nullable().optional(),
  modelCapacity: z.number().int().positive().nullable().optional(),
});
export type LimitsPatch = z.input<typeof limitsPatchSchema>;

export const controlCommandSchema = z.discriminatedUnion('op', [
  /** Replaces the fault settings (fields left out take their defaults, i.e. no fault). */
  z.strictObject({ op: z.literal('setFaults'), faults: faultSettingsSchema }),
  /** Adds or replaces the scripted faults of prompts containing `match`. */
  z.strictObject({ op: z.literal('script'), match: z.string().min(1), faults: z.array(faultSchema) }),
  z.strictObject({ op: z.literal('clearScripts') }),
  z.strictObject({ op: z.literal('revokeKey'), keyId: z.string().min(1) }),
  z.strictObject({
    op: z.literal('addKey'),
    accountId: z.string().min(1),
    keyId: z.string().min(1),
    key: z.string().min(1),
  }),
  z.strictObject({ op: z.literal('setAccountDisabled'), accountId: z.string().min(1), disabled: z.boolean() }),
  z.strictObject({ op: z.literal('setWallet'), accountId: z.string().min(1), usd: z.number().finite().nonnegative() }),
  z.strictObject({
    op: z.literal('setMonthlyBudget'),
    keyId: z.string().min(1),
    usd: z.number().finite().nonnegative().nullable(),
  }),
  z.strictObject({
    op: z.literal('setIdempotencyVariant'),
    variant: z.enum([IdempotencyVariant.AcceptedOnly, IdempotencyVariant.AllJudged]),
  }),
  z.strictObject({ op: z.literal('setStatusNaming'), naming: z.enum(['default', 'alternate']) }),
  z.strictObject({ op: z.literal('setLimits'), limits: limitsPatchSchema }),
]);
export type ControlCommand = z.input<typeof controlCommandSchema>;

/** Validates and applies one command; throws {@link SimulatorConfigError} naming the wrong field. */
export function applyControl(engine: SimulatorEngine, input: unknown): void {
  const parsed = controlCommandSchema.safeParse(input);
  if (!parsed.success) throw new SimulatorConfigError(describeIssues(parsed.error));
  const command = parsed.data;
  engine.settle();
  engine.revision++;
  switch (command.op) {
    case 'setFaults':
      engine.faults.settings = command.faults;
      return;
    case 'script':
      engine.faults.scriptFor(command.match, command.faults);
      return;
    case 'clearScripts':
      engine.faults.clearScripts();
      return;
    case 'revokeKey':
      engine.keys.revoke(command.keyId);
      return;
    case 'addKey':
      engine.keys.add(command.accountId, command.keyId, hashApiKey(command.key));
      return;
    case 'setAccountDisabled':
      engine.keys.setAccountDisabled(command.accountId, command.disabled);
      return;
    case 'setWallet':
      if (!engine.keys.hasAccount(command.accountId)) throw new Error(`unknown account "${command.accountId}"`);
      engine.billing.setWallet(command.accountId, command.usd);
      return;
    case 'setMonthlyBudget':
      engine.billing.setMonthlyBudget(command.keyId, command.usd);
      return;
    case 'setIdempotencyVariant':
      engine.variant = command.variant;
      return;
    case 'setStatusNaming':
      engine.naming = command.naming;
      return;
    case 'setLimits': {
      const limits = engine.config.limits;
      const patch = command.limits;
      if (patch.requestsPerSecond !== undefined)
        limits.requestsPerSecond = engine.limiter.perSecond = patch.requestsPerSecond;
      if (patch.burst !== undefined) limits.burst = engine.limiter.burst = patch.burst;
      if (patch.minPollIntervalMs !== undefined) limits.minPollIntervalMs = patch.minPollIntervalMs;
      if (patch.accountConcurrency !== undefined) limits.accountConcurrency = patch.accountConcurrency;
      if (patch.modelCapacity !== undefined) limits.modelCapacity = patch.modelCapacity;
      return;
    }
  }
}

/** A fault as scripts and controls accept it: its kind, or `{ kind, delayMs }`. */
export type FaultInput = FaultKind | Fault;

/** The run-time controls of a running simulator, in process. */
export interface SimulatorControls {
  /** Applies a control command (the same as `POST /_sim/control`). */
  control(command: ControlCommand): void;
  /** Replaces the fault settings; fields left out are off. */
  setFaults(settings: Partial<FaultSettings>): void;
  /** Faults handed out to submissions since this simulator started, by kind (`none` included). */
  faultCounts(): Record<FaultKind, number>;
  /** Submissions whose prompt contains `match` get these faults, one per submission, in order. */
  scriptFor(match: string, faults: readonly FaultInput[]): void;
  revokeKey(keyId: string): void;
  addKey(accountId: string, keyId: string, key: string): void;
  setAccountDisabled(accountId: string, disabled: boolean): void;
  setWallet(accountId: string, usd: number): void;
  walletUsd(accountId: string): number;
  setMonthlyBudget(keyId: string, usd: number | null): void;
  setIdempotencyVariant(variant: IdempotencyVariant): void;
  setStatusNaming(naming: StatusNamingName): void;
  setLimits(limits: LimitsPatch): void;
}

/** The controls of `engine`, each a command through {@link applyControl} (or a read after settling). */
export function controlsOf(engine: SimulatorEngine): SimulatorControls {
  return {
    control: (command) => applyControl(engine, command),
    setFaults: (settings) => applyControl(engine, { op: 'setFaults', faults: settings }),
    faultCounts: () => engine.faults.counts(),
    scriptFor: (match, faults) => applyControl(engine, { op: 'script', match, faults: [...faults] }),
    revokeKey: (keyId) => applyControl(engine, { op: 'revokeKey', keyId }),
    addKey: (accountId, keyId, key) => applyControl(engine, { op: 'addKey', accountId, keyId, key }),
    setAccountDisabled: (accountId, disabled) =>
      applyControl(engine, { op: 'setAccountDisabled', accountId, disabled }),
    setWallet: (accountId, usd) => applyControl(engine, { op: 'setWallet', accountId, usd }),
    walletUsd: (accountId) => {
      engine.settle();
      return engine.billing.balanceUsd(accountId);
    },
    setMonthlyBudget: (keyId, usd) => applyControl(engine, { op: 'setMonthlyBudget', keyId, usd }),
    setIdempotencyVariant: (variant) => applyControl(engine, { op: 'setIdempotencyVariant', variant }),
    setStatusNaming: (naming) => applyControl(engine, { op: 'setStatusNaming', naming }),
    setLimits: (limits) => applyControl(engine, { op: 'setLimits', limits }),
  };
}
