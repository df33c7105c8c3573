import { FailureMessage } from '../api/contract';
import { type Principal } from './auth';
import { type SimulatorConfig } from './config';
import { type Creation } from './creations';
import { forcedFailure, type Fault } from './faults';
import { drawGeneration, type GenerationTiming } from './generation';
import { hash32, mulberry32, type Random } from './random';
import { type ValidCreationBody } from './validation';

/** What a creation is started from: the accepted, charged request. */
export interface CreationStart {
  principal: Principal;
  request: ValidCreationBody;
  id: string;
  micros: number;
  idempotencyKey: string | null;
  fault: Fault;
  now: number;
}

/**
 * Fixes the creation's whole future at acceptance: timings (from `timing`, the request's model's) drawn from the
 * creation's own seeded stream, then its outcome.
 */
export function newCreation(
  start: CreationStart,
  timing: GenerationTiming,
  config: Pick<SimulatorConfig, 'seed' | 'safety'>,
): Creation {
  const { principal, request, id, now } = start;
  const own = mulberry32(hash32(id, config.seed));
  const { queuedMs, runningMs } = drawGeneration(timing, own);
  const runningAt = now + queuedMs;
  const finishedAt = runningAt + runningMs;
  return {
    id,
    accountId: principal.accountId,
    keyId: principal.keyId,
    idempotencyKey: start.idempotencyKey,
    model: request.model,
    prompt: request.prompt,
    negativePrompt: request.negativePrompt,
    width: request.width,
    height: request.height,
    numImages: request.numImages,
    seed: request.seed ?? Math.floor(own() * 2 ** 32),
    costMicros: start.micros,
    acceptedAt: now,
    runningAt,
    finishedAt,
    error: forcedFailure(start.fault.kind) ?? safetyFilter(request.prompt, own, config.safety),
    settled: false,
    lastPollAt: undefined,
  };
}

/** The model's safety filter, applied to what will be generated: trigger words, and generic prompts. */
function safetyFilter(prompt: string, random: Random, safety: SimulatorConfig['safety']): FailureMessage | undefined {
  const { triggerWords, genericDeclineProbability } = safety;
  const lower = prompt.toLowerCase();
  if (triggerWords.some((word) => lower.includes(word.toLowerCase()))) return FailureMessage.SafetyFilter;
  const words = lower.split(/\s+/).filter(Boolean).length;
  if (words <= 2 && random() < genericDeclineProbability) return FailureMessage.SafetyFilter;
  return undefined;
}
