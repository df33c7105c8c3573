import { DefaultLogger, Runtime } from '@temporalio/worker';

// One quiet Temporal runtime per test process: warnings and errors only.
Runtime.install({ logger: new DefaultLogger('WARN') });
