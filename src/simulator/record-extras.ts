import { type SimulatorConfig } from './config';
import { Phase, phaseAt, type Creation } from './creations';

/**
 * What a polled record shows besides contract-defaults.md's fields (config `records`), as a tester met it (issue
 * #42): a status that passes between running and success (`passingStatus`), and the links such a service puts in
 * every record (`links`): its API's own (`urls.get`, `urls.cancel`, answered only with the key) and the creation's
 * logs (`logs`, served as `text/plain` by the files port). None of them is an image.
 */

/** Where the links point: the API's base URL and the files port's origin. */
export interface RecordOrigins {
  api: string;
  files: string;
}

/** The logs of a creation on the files port. */
export const LOGS_PATH = /^\/logs\/(cr_[0-9A-Z]+)\.txt$/;

/** `record` (contract-defaults.md's form) with the passing status and the links `records` asks for. */
export function withRecordExtras(
  record: object,
  c: Creation,
  now: number,
  records: SimulatorConfig['records'],
  origins: RecordOrigins,
): object {
  const passing = records.passingStatus;
  const passes = passing !== undefined && phaseAt(c, now) === Phase.Running && now >= c.finishedAt - passing.lastMs;
  if (!passes && records.links !== true) return record;
  const id = encodeURIComponent(c.id);
  return {
    ...record,
    ...(passes ? { status: passing.word } : {}),
    ...(records.links === true
      ? {
          urls: { get: `${origins.api}/creations/${id}`, cancel: `${origins.api}/creations/${id}/cancel` },
          logs: `${origins.files}/logs/${id}.txt`,
        }
      : {}),
  };
}
