import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';

// One quiet Temporal runtime per test process: warnings and errors only. A unit test process runs several files
// (vitest.config.mts: isolate off), and the SDK keeps its runtime across them: install it once.
// In-process CLI runs (main(argv, io)) never start local mode's server by accident: a test that means it says so.
process.env.IMAGEBATCH_LOCAL ??= 'off';

if (!Runtime._instance) Runtime.install({ logger: new DefaultLogger('WARN') });

// Every test file a user data folder of its own, inherited by the commands and workers it starts: the default ledger
// store (and local mode's default home) is never the user's, nor another file's or another run's.
process.env.XDG_DATA_HOME = mkdtempSync(path.join(tmpdir(), 'ib-data-'));
// And a config folder of its own: the record of the ledger stores used (src/ledger/known-stores.ts) is never the
// user's, and one file's stores never stop another's.
process.env.XDG_CONFIG_HOME = mkdtempSync(path.join(tmpdir(), 'ib-config-'));
