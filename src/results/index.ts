export { collectResults, type CollectResultsOptions, type ResultRow, type ResultState } from './collect';
export { writeResults, type JsonlKey, type JsonlRecord, type WrittenResults } from './write';
export { galleryHtml } from './gallery';
export { runResultsWriter } from './run-writer';
