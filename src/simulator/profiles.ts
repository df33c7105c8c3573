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
 * An independent prediction-style service written to the interface (issue #42): its body names of its own (the model
 * as `version`, the request's fields under `input`, `num_outputs` for the count), and the idempotency key read only
 * from the body field `metadata.idempotency_key`. A key sent in a header is ignored: each send is a new creation,
 * charged again. imagebatch meets it with `IMAGEGEN_REQUEST_FIELDS` set to these names and
 * `IMAGEGEN_IDEMPOTENCY_FIELD=metadata.idempotency_key`.
 */
export const PREDICTION_SERVICE_PROFILE: SimulatorConfigInput = {
  idempotency: { header: null, field: 'metadata.idempotency_key' },
  requestLayout: {
    fields: {
      model: 'version',
      prompt: 'input.prompt',
      negative_prompt: 'input.negative_prompt',
      width: 'input.width',
      height: 'input.height',
      seed: 'input.seed',
      num_images: 'input.num_outputs',
    },
  },
};

/**
 * A prediction-style service behind a distributed store (issue #42): a status outside every set (`uploading`) passes
 * between running and success, over the last 1.5 s of the running time; every polled record carries the API's own
 * links (`urls.get`, `urls.cancel`) and a logs URL (`logs`) that the files port serves as `text/plain`. None is an
 * image.
 */
export const PASSING_STATUS_PROFILE: SimulatorConfigInput = {
  records: { passingStatus: { word: 'uploading', lastMs: 1_500 }, links: true },
};

/**
 * The same service's poll limit (issue #42): a minimum poll interval of 3 s, longer than imagebatch's default (2 s),
 * and every answer to a poll of a creation still in flight says `Retry-After: 3`. Its store answers a poll 250 ms after
 * reading the creation.
 */
export const POLL_HINT_PROFILE: SimulatorConfigInput = {
  limits: { minPollIntervalMs: 3_000, inFlightRetryAfter: true },
  pollLatencyMs: 250,
};

/**
 * A service behind a distributed store whose reads lag its writes (issue #42): a creation just accepted is answered
 * `404 ERR_NOT_FOUND` for up to 3 s (each creation's lag drawn in 0 to 3 s), then found as usual.
 */
export const LAGGING_READS_PROFILE: SimulatorConfigInput = {
  readLagMs: { minMs: 0, maxMs: 3_000 },
};
