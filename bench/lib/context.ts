import type { Table } from './table';

/** What every benchmark gets from bench/index.ts. */
export interface BenchContext {
  /** Small sizes for a smoke run (`--quick`): the tables then prove the bench works, not the figures. */
  quick: boolean;
  /** Progress lines (stderr), so that stdout stays paste-ready markdown. */
  log: (line: string) => void;
  /** Results of benchmarks that ran earlier in the same run, by name (the naive comparison reads ours). */
  earlier: Map<string, unknown>;
}

/** One benchmark: a name for `--only`, and a run that returns its table (and a result later ones may read). */
export interface Benchmark {
  name: string;
  run(ctx: BenchContext): Promise<{ table: Table; result?: unknown }>;
}
