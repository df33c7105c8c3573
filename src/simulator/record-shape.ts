import { StatusNaming } from '../api/contract';
import { type SimulatorConfig } from './config';

/**
 * How a creation record shows its images and its status (config `records`). Records are built, and stored for
 * idempotent replays (and so in the state file), in gaps.md's form (`status`, `images[].url`); they are shown as the
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
      }
    }),
  );
}
