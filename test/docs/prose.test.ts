import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { docPages, measure } from './prose';

/**
 * The docs stay short enough to read once (issue 34): every page's sentences under 25 words on average and none
 * over 40, no page over 2,000 words, and the README with docs/ under 13,000 words, the glossary and the contract's
 * defaults aside (they are reference lists). `npx tsx test/docs/prose.ts` prints the figures per page.
 */
const ROOT = path.join(__dirname, '..', '..');
const MAX_MEAN_SENTENCE = 25;
const MAX_SENTENCE = 40;
const MAX_PAGE_WORDS = 2_000;
const MAX_TOTAL_WORDS = 13_000;
/** Reference pages, left out of the total. */
const REFERENCE = new Set(['docs/glossary.md', 'docs/contract-defaults.md']);

const pages = docPages(ROOT).map((page) => ({
  page,
  ...measure(readFileSync(path.join(ROOT, page), 'utf8'), MAX_SENTENCE),
}));

describe('docs length', () => {
  it.each(pages)('$page: sentences under 25 words on average, none over 40', ({ meanSentence, long }) => {
    expect(long).toEqual([]);
    expect(meanSentence).toBeLessThan(MAX_MEAN_SENTENCE);
  });

  it.each(pages)('$page: at most 2,000 words', ({ words }) => {
    expect(words).toBeLessThanOrEqual(MAX_PAGE_WORDS);
  });

  it('the README and docs/ hold under 13,000 words, the reference pages aside', () => {
    const total = pages.filter((p) => !REFERENCE.has(p.page)).reduce((sum, p) => sum + p.words, 0);
    expect(total).toBeLessThan(MAX_TOTAL_WORDS);
  });
});
