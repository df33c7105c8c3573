import { z } from 'zod';
import { FaultKind, PROBABILISTIC_FAULTS, type Fault } from './faults';

/** The faults of the simulator's config: scripted per prompt, and drawn by probability. */

const probability = z.number().min(0).max(1);
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
  providerRetryAfterSeconds: z.number().int().positive().default(2),
});
