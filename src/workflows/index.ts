export * from './prompt-workflow';
export * from './batch-workflow';
export * from './scheduled-batch-workflow';
export * from './catalog-workflow';
export * from './definitions';
export * from './reconcile-workflow';
export * from './doctor-workflow';
export * from './ledger-check-workflow';
