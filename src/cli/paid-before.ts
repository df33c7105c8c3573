import type { Client } from '@temporalio/client';
import type { ModelInfo, PaidRequests, PaidRequestsInput } from '../model';
import { paidRequestsWorkflow } from '../workflows';
import { estimateOf, priceModels, readCatalog } from './prices';

/** How long a command waits for a worker to say what was paid before; then it says it could not, and goes on. */
export const PAID_BEFORE_TIMEOUT = '1 minute';

/** Which of a file's requests were paid before, through a running worker, or why it could not be told. */
export async function readPaidRequests(
  client: Client,
  taskQueue: string,
  input: PaidRequestsInput,
): Promise<PaidRequests | { problem: string }> {
  try {
    return await client.workflow.execute(paidRequestsWorkflow, {
      taskQueue,
      workflowId: `paid-before/${Date.now()}-${Math.random().toString(36).slice(2, 8)}`,
      workflowExecutionTimeout: PAID_BEFORE_TIMEOUT,
      args: [input],
    });
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    const why = cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
    return { problem: `${why} (is a worker running on task queue ${taskQueue}?)` };
  }
}

const count = (n: number) => n.toLocaleString('en-US');
const plural = (n: number, one: string, many = `${one}s`) => `${count(n)} ${n === 1 ? one : many}`;

/**
 * What a batch will pay, said before its first request: `1,632 rows: 1,600 already paid (reused, $0.00), 32 new (about
 * $1.28 at the catalog price)`. Rows that ran before under the same batch id are said apart: they send nothing new. A
 * price nobody showed is said to be unknown, never counted as 0.
 */
export function paidBeforeLine(
  paid: PaidRequests,
  catalog: readonly ModelInfo[] | undefined,
  userPrices: Readonly<Record<string, number>>,
  newImages = false,
): string {
  const rowsOf = (usage: PaidRequests['paid']) => Object.values(usage).reduce((n, u) => n + u.rows, 0);
  const fresh = rowsOf(paid.fresh);
  const models = priceModels(paid.fresh, catalog, userPrices);
  const { knownUsd, unknownModels } = estimateOf(models);
  const sources = new Set(models.map((m) => m.source).filter(Boolean));
  const at = sources.has('user')
    ? sources.has('catalog')
      ? 'at the catalog and your prices'
      : 'at your prices'
    : 'at the catalog price';
  let cost: string;
  if (fresh === 0) cost = '$0.00';
  else if (!catalog && unknownModels.length === models.length) cost = 'price not known: the catalog could not be read';
  else if (unknownModels.length === 0) cost = `about $${knownUsd.toFixed(2)} ${at}`;
  else {
    const unpriced = models.filter((m) => m.priceUsd === undefined).reduce((n, m) => n + m.rows, 0);
    cost =
      `about $${knownUsd.toFixed(2)} ${at}, and ${plural(unpriced, 'row')} of ${unknownModels.join(', ')} at a ` +
      'price nobody showed';
  }
  const earlier = rowsOf(paid.earlier ?? {});
  const reused = rowsOf(paid.paid);
  if (newImages && earlier === 0) return `${plural(paid.rows, 'row')}, all new (--new-images) (${cost})`;
  return [
    `${plural(paid.rows, 'row')}: `,
    earlier > 0 ? `${count(earlier)} ran before in this batch (counted from their records), ` : '',
    newImages || (earlier > 0 && reused === 0) ? '' : `${count(reused)} already paid (reused, $0.00), `,
    `${count(fresh)} new${newImages ? ' (--new-images)' : ''} (${cost})`,
  ].join('');
}

/** The line of {@link paidBeforeLine} for a file, asked of a running worker; a line saying why not when it cannot. */
export async function sayPaidBefore(
  client: Client,
  taskQueue: string,
  input: PaidRequestsInput,
  userPrices: Readonly<Record<string, number>>,
): Promise<string> {
  const [paid, catalog] = await Promise.all([
    readPaidRequests(client, taskQueue, input),
    readCatalog(client, taskQueue),
  ]);
  if ('problem' in paid) return `could not tell which requests were paid before: ${paid.problem}`;
  return paidBeforeLine(paid, 'models' in catalog ? catalog.models : undefined, userPrices, input.newImages === true);
}
