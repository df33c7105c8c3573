export * from './events';
export * from './fingerprint';
export * from './jsonl';
export * from './location';
export * from './rules';
export * from './sql-store';
export * from './store';
