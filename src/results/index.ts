export { collectResults, type CollectResultsOptions, type ResultRow, type ResultState } from './collect';
export { writeResults, type WrittenResults } from './write';
export { galleryHtml } from './gallery';
