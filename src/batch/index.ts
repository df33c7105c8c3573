/** Reading and validating batch files (CSV, TSV, JSON Lines): one full-file validator, one resumable page reader. */
export { validateBatchFile, type BatchReport, type ModelUsage, type ValidateOptions } from './validate';
export { readBatchPage, type BatchPage, type ReadPageOptions } from './page-reader';
export { type BatchRow, FieldLimit, ROW_ID_PATTERN } from './schema';
export { Column, MAX_EXTRA_VALUE_CHARS, MAX_USER_COLUMNS, isKnownColumn } from './header';
export { type BatchProblem, BatchFileError, BatchFileErrorReason, ProblemCode } from './problems';
export { type ScanLimits, DEFAULT_MAX_FIELDS, DEFAULT_MAX_RECORD_BYTES } from './scan';
export { formatName } from './format';
