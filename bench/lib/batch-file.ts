import { createWriteStream } from 'node:fs';
import { once } from 'node:events';

/** Id of the i-th row (1-based) of a file written by {@link writeBatchFile}. */
export function rowIdOf(i: number): string {
  return `b${String(i).padStart(6, '0')}`;
}

/** Ids of every row of a file of `rows` rows written by {@link writeBatchFile}. */
export function rowIds(rows: number): string[] {
  return Array.from({ length: rows }, (_, i) => rowIdOf(i + 1));
}

/**
 * Writes a batch file of `rows` distinct prompts, long enough never to be declined as generic, with ids
 * `b000001`... Streaming, so a 100,000-row file costs no memory. The naive script reads the same file. `model` is
 * one model id, or a list that the rows take in turn (row i the (i - 1) mod n-th).
 */
export async function writeBatchFile(
  file: string,
  rows: number,
  model: string | readonly string[] = 'sdxl',
): Promise<void> {
  const models = typeof model === 'string' ? [model] : model;
  if (models.length === 0) throw new Error('writeBatchFile: no model');
  const out = createWriteStream(file);
  out.write('id,prompt,model\n');
  for (let i = 1; i <= rows; i++) {
    const rowModel = models[(i - 1) % models.length] ?? '';
    const line = `${rowIdOf(i)},"a watercolour harbour at dawn, boats and gulls, number ${i}",${rowModel}\n`;
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

/**
 * Writes a batch file that exercises the reader: every optional column, quoted prompts with commas, doubled quotes
 * and line breaks, multi-byte text (the format of bench/csv-validate.ts).
 */
export async function writeRichBatchFile(file: string, rows: number): Promise<void> {
  const out = createWriteStream(file);
  out.write('id,prompt,model,negative_prompt,width,height,seed,num_images\n');
  for (let i = 1; i <= rows; i++) {
    const prompt = `"A watercolour of lighthouse #${i}, at dusk, ""soft"" light\nwith gulls, café, 日本 🎨"`;
    const model = i % 3 === 0 ? 'sdxl' : 'flux-dev';
    const line = `item-${i},${prompt},${model},blurry,${512 + (i % 4) * 64},768,${i},${(i % 4) + 1}\n`;
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}
