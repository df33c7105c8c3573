import type { SimulatorConfigInput } from './config';

/**
 * Ready-made configurations of the simulator that copy a kind of service met in the field. Each is a plain part of a
 * config (the same fields a config file takes), spread into one.
 */

/**
 * An independent queue-style service written to the interface (issue #30): records wrapped in `data`, the image URL
 * one level down under a name no list holds (`result.artifact_location`) beside a link to a web page (`links.web`),
 * the cost as `{ "amount": "0.04", "currency": "USD" }`, the image URL answering with a redirect to the file, served as
 * `application/octet-stream` and gone (410) 20 s after the creation ended.
 */
export const QUEUE_SERVICE_PROFILE: SimulatorConfigInput = {
  records: { imageShape: 'queue', envelope: 'data' },
  pricing: { fields: 'amount' },
  files: { redirect: true, contentType: 'application/octet-stream', expireAfterMs: 20_000, expiredStatus: 410 },
};

/**
 * A service behind a distributed store whose reads lag its writes (issue #42): a creation just accepted is answered
 * `404 ERR_NOT_FOUND` for up to 3 s (each creation's lag drawn in 0 to 3 s), then found as usual.
 */
export const LAGGING_READS_PROFILE: SimulatorConfigInput = {
  readLagMs: { minMs: 0, maxMs: 3_000 },
};
