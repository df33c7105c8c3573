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
