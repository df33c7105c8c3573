/**
 * Writes a run's result files (results.csv, results.jsonl, errors.csv, unresolved.csv, index.html) into `outDir`, as
 * `imagebatch results` does. src/results makes it and the worker hands it to the activities, which sit below
 * src/results; `file` is absent for a run that never started (its files list no row).
 */
export type RunResultsWriter = (run: {
  batchId: string;
  outDir: string;
  file?: string;
  defaultModel?: string;
}) => Promise<{ resultsCsv: string }>;
