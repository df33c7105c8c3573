import { StatusNaming } from '../api/contract';
import { type SimulatorConfig } from './config';
import { showCost } from './pricing';

/**
 * How a creation record shows its images and its status (config `records`). Records are built, and stored for
 * idempotent replays (and so in the state file), in contract-defaults.md's form (`status`, `images[].url`); they are shown as the
 * setting says only when sent, like prices (see `pricing.ts`), so a replayed 202 looks like a fresh one under the
 * current setting. Nothing else (charges, the files port) depends on this.
 */

export type RecordShape = SimulatorConfig['records'];

interface Image {
  url: string;
  width: number;
  height: number;
}

/**
 * `record` with its `status` under `shape.statusField` (in the same place; a success as `shape.succeededStatus` when
 * set) and its images where `shape.imageShape` puts them. `png(n)` gives the bytes of image n, for the inline shapes.
 */
export function showRecord(record: object, shape: RecordShape, png: (n: number) => Buffer): object {
  const { succeededStatus } = shape;
  if (shape.imageShape === 'default' && shape.statusField === 'status' && succeededStatus === undefined) return record;
  const base64 = (n: number) => png(n).toString('base64');
  const succeeded: readonly unknown[] = [StatusNaming.default.succeeded, StatusNaming.alternate.succeeded];
  const id = String((record as { id?: unknown }).id);
  return Object.fromEntries(
    Object.entries(record).flatMap(([name, value]): [string, unknown][] => {
      if (name === 'status') {
        return [
          [shape.statusField, succeededStatus !== undefined && succeeded.includes(value) ? succeededStatus : value],
        ];
      }
      if (name !== 'images') return [[name, value]];
      const images = value as Image[];
      switch (shape.imageShape) {
        case 'default':
          return [[name, images]];
        case 'nested':
          return [['result', { files: images.map(({ url, ...size }) => ({ href: url, ...size })) }]];
        case 'inline-base64':
          return [['data', images.map((_, n) => ({ b64_json: base64(n) }))]];
        case 'data-uri':
          return [['images', images.map((image, n) => ({ ...image, url: `data:image/png;base64,${base64(n)}` }))]];
        case 'none':
          return [];
        case 'queue':
          return queueImages(id, images);
      }
    }),
  );
}

/**
 * The `queue` shape: image 0 at `result.artifact_location` (image n at `result.artifact_location_<n>`), after a link to
 * the job's web page on the files port (`links.web`), which is no image. Nothing while the creation has no image.
 */
function queueImages(id: string, images: readonly Image[]): [string, unknown][] {
  const first = images[0];
  if (!first) return [];
  const result = Object.fromEntries(images.map(({ url }, n) => [`artifact_location${n === 0 ? '' : `_${n}`}`, url]));
  return [
    ['links', { web: `${new URL(first.url).origin}/jobs/${encodeURIComponent(id)}` }],
    ['result', result],
  ];
}

/** A creation record as sent: its status and images where `records` puts them, its cost as priced, in its envelope. */
export function presentRecord(
  record: object,
  config: Pick<SimulatorConfig, 'records' | 'pricing'>,
  withCost: boolean,
  png: (n: number) => Buffer,
): object {
  const shown = showCost(showRecord(record, config.records, png), config.pricing.fields, withCost);
  return config.records.envelope === 'data' ? { data: shown } : shown;
}
