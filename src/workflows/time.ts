/**
 * Workflow time. Inside Temporal's workflow sandbox `Date` is replaced by a deterministic clock (the time of
 * the current workflow task, the same on every replay), so this is the workflow API's notion of "now". The
 * lint rule against `Date.now()` in workflow files exists to make every such use go through here.
 */
export function workflowNow(): number {
  // eslint-disable-next-line no-restricted-syntax -- deterministic inside the workflow sandbox (see above)
  return Date.now();
}
