/**
 * Measures of a Markdown page's prose, for the docs' length bounds (test/docs/prose.test.ts) and for
 * `npx tsx test/docs/prose.ts` (a table per page). Code blocks and table rows are left out; a heading, a list item
 * and a paragraph each start a new sentence; inside one, a sentence ends at `.`, `!` or `?` before a space and a
 * capital letter, a backtick, a quote or a bracket.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export interface ProseMeasure {
  /** Words of the whole page (whitespace-separated, as `wc -w` counts them). */
  readonly words: number;
  /** Words of the prose: outside code blocks and tables, a link counted by its text. */
  readonly proseWords: number;
  readonly sentences: number;
  /** Mean words per sentence of the prose. */
  readonly meanSentence: number;
  /** The sentences over `longOver` words, each as its first words. */
  readonly long: readonly string[];
}

const WORD = /\S+/g;

/** The sentences of a page's prose, each as its words joined by single spaces. */
export function sentencesOf(markdown: string): string[] {
  const text = markdown
    .replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '\n')
    .replace(/^\|.*$/gm, '\n')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[a-z][^>\n]*>/g, (tag) => (tag.startsWith('<http') ? tag : ''));
  const units = text
    .split(/\n\s*\n|\n(?=\s*(?:[-*+]|\d+\.|#{1,6}) )/)
    .map((u) => u.replace(/\s+/g, ' ').trim())
    .filter((u) => u !== '');
  return units.flatMap((u) =>
    u
      .split(/(?<=[.!?]["')*_]*) (?=[A-Z`"'(*[_])|(?<=[.!?]["')*_]*) (?=\d)/)
      .map((s) => s.trim())
      .filter((s) => (s.match(WORD) ?? []).some((w) => /[\p{L}\p{N}]/u.test(w))),
  );
}

export function measure(markdown: string, longOver: number): ProseMeasure {
  const sentences = sentencesOf(markdown);
  const counts = sentences.map((s) => s.match(WORD)?.length ?? 0);
  const proseWords = counts.reduce((a, b) => a + b, 0);
  return {
    words: markdown.match(WORD)?.length ?? 0,
    proseWords,
    sentences: sentences.length,
    meanSentence: sentences.length === 0 ? 0 : proseWords / sentences.length,
    long: sentences
      .filter((_, i) => (counts[i] ?? 0) > longOver)
      .map((s) => `${s.split(' ').slice(0, 8).join(' ')} ...`),
  };
}

/** The README and every page under docs/, relative to the repository's root. */
export function docPages(root: string): string[] {
  return ['README.md', ...readdirSync(path.join(root, 'docs')).map((f) => `docs/${f}`)].filter((f) =>
    f.endsWith('.md'),
  );
}

if (require.main === module) {
  const root = path.join(__dirname, '..', '..');
  let words = 0;
  for (const page of docPages(root)) {
    const m = measure(readFileSync(path.join(root, page), 'utf8'), 40);
    words += m.words;
    console.log(
      `${page.padEnd(28)} ${String(m.words).padStart(6)} words  ${m.meanSentence.toFixed(1).padStart(5)} mean  ${String(m.long.length).padStart(3)} over 40`,
    );
  }
  console.log(`${'total'.padEnd(28)} ${String(words).padStart(6)} words`);
}
