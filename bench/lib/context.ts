import type { Table } from './table';

/** What every benchmark gets from bench/index.ts. */
export interface BenchContext {
  /** Small sizes for a smoke run (`--quick`): the tables then prove the bench works, not the figures. */
  quick: boolean;
  /** Progress lines (stderr), so that stdout stays paste-ready markdown. */
  log: (line: string) => void;
  /** Results of benchmarks that ran earlier in the same run, by name (the naive comparison reads ours). */
  earlier: Map<string, unknown>;
  /**
   * Where a benchmark writes a file beside the tables (a plot): `<suffix>` appended to the `--out` file's name in its
   * folder, else in bench/out/ (git-ignored). The folder exists.
   */
  artifact: (suffix: string) => string;
}

/**
 * One benchmark: a name for `--only`, and a run that returns its table, optionally more tables printed after it,
 * and a result later ones may read.
 */
export interface Benchmark {
  name: string;
  run(ctx: BenchContext): Promise<{ table: Table; more?: Table[]; result?: unknown }>;
}
