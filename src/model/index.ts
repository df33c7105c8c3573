/**
 * imagebatch's model: the domain's types and its few pure rules, with no dependencies. Every other layer imports
 * from here; this folder imports nothing outside itself (the lint enforces it, eslint.config.mjs).
 *
 * Glossary:
 * - row: one line of the batch file (CSV) = one prompt workflow (`promptWorkflow`), ending with one RowRecord.
 * - key: one idempotency key = one attempt of a row (a new key only after a refunded or declined one); KeyRecord.
 * - creation: the service's job for one accepted key (a creation id; it is paid at acceptance).
 * - batch: one batch file run by one batch workflow, which starts its rows and adds up their records.
 */
export * from './batch-file';
export * from './creation';
export * from './errors';
export * from './failure';
export * from './ids';
export * from './images-asked';
export * from './key-check';
export * from './ledger';
export * from './limits';
export * from './progress';
export * from './record';
export * from './row';
export * from './run-results';
export * from './stop-loss';
export * from './service-check';
export * from './wait-text';
export * from './window';
export * from './workflow-interface';
export * from './scheduled-run';
