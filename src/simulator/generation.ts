import { GenerationShape, type SimulatorConfig } from './config';
import { standardNormal, uniformInt, type Random } from './random';

/** A model's generation timing, resolved from the config's `generation` (its general fields and its `models`). */
export interface GenerationTiming {
  queuedMs: { minMs: number; maxMs: number };
  runningMs: { minMs: number; maxMs: number };
  shape: GenerationShape;
  /** Median running time when log-normal. */
  medianMs: number;
  /** Standard deviation of ln(running time) when log-normal. */
  sigma: number;
}

/** The timing of `model`: its own fields over the general ones (see the config's `generation.models`). */
export function timingOf(generation: SimulatorConfig['generation'], model: string): GenerationTiming {
  const own = generation.models[model] ?? {};
  const runningMs = own.runningMs ?? generation.runningMs;
  return {
    queuedMs: own.queuedMs ?? generation.queuedMs,
    runningMs,
    shape: own.shape ?? generation.shape,
    medianMs:
      own.medianMs ??
      (own.runningMs === undefined ? generation.medianMs : undefined) ??
      Math.sqrt(Math.max(1, runningMs.minMs) * Math.max(1, runningMs.maxMs)),
    sigma: own.sigma ?? generation.sigma,
  };
}

/**
 * A creation's queued and running times, drawn from its own stream: the queued time first (uniform), then the
 * running time (one draw when uniform, two for Box-Muller when log-normal), so that the uniform shape takes
 * exactly the draws it always took.
 */
export function drawGeneration(timing: GenerationTiming, random: Random): { queuedMs: number; runningMs: number } {
  const { queuedMs, runningMs } = timing;
  const queued = uniformInt(random, queuedMs.minMs, queuedMs.maxMs);
  if (timing.shape === GenerationShape.Uniform) {
    return { queuedMs: queued, runningMs: uniformInt(random, runningMs.minMs, runningMs.maxMs) };
  }
  const drawn = Math.round(Math.exp(Math.log(timing.medianMs) + timing.sigma * standardNormal(random)));
  return { queuedMs: queued, runningMs: Math.min(runningMs.maxMs, Math.max(runningMs.minMs, drawn)) };
}
