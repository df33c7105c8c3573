/**
 * How many history events a row's happy path takes (one key, one creation, its images saved): the one place the
 * tests take the count from, and what docs/design.md ("A row's history") states. Polls, 429s and backoffs add none.
 */
export const ROW_HAPPY_PATH_EVENTS = {
  /**
   * A row on its own: its start, a workflow task (scheduled, started, completed), the patch marker and the version
   * search-attribute upsert, `createImage` (scheduled, started, completed), a second workflow task, the ledger write
   * (a local activity's marker) and its completion, as recorded in
   * test/replay/histories/v3-one-to-one-keys-and-ledger-prompt-happy-path.json.
   */
  alone: 14,
  /**
   * A row of a batch: the same, plus the `rowDone` signal carrying its record to the batch (initiated, then
   * signaled) and the workflow task that signal's answer wakes.
   */
  inBatch: 19,
} as const;
