import { z } from 'zod';

/** How long a creation waits queued and runs: the `generation` part of the simulator's config. */

/** A range of milliseconds, `minMs` to `maxMs` inclusive. */
export const rangeSchema = z
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

/**
 * Time a creation waits queued (uniform in `queuedMs`), then runs (`runningMs`, drawn in the `shape`), each
 * from the creation's own seeded stream; `models` gives a model timing of its own.
 */
export const generationSchema = z
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
  .prefault({});

/** Each `medianMs` outside its `runningMs`, and each model timing of a model the catalog lacks, as an issue. */
export function generationIssues(
  generation: z.output<typeof generationSchema>,
  modelIds: ReadonlySet<string>,
  addIssue: (path: (string | number)[], message: string) => void,
): void {
  const checkMedian = (medianMs: number | undefined, range: { minMs: number; maxMs: number }, at: string[]) => {
    if (medianMs !== undefined && (medianMs < range.minMs || medianMs > range.maxMs))
      addIssue(['generation', ...at, 'medianMs'], `must lie within runningMs [${range.minMs}, ${range.maxMs}]`);
  };
  checkMedian(generation.medianMs, generation.runningMs, []);
  for (const [id, timing] of Object.entries(generation.models)) {
    if (!modelIds.has(id)) addIssue(['generation', 'models', id], `unknown model "${id}"`);
    checkMedian(timing.medianMs, timing.runningMs ?? generation.runningMs, ['models', id]);
  }
}
