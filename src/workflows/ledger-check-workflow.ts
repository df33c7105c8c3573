import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { MAX_FINDINGS_LISTED, type LedgerCheckScope, type LedgerCheckSummary } from '../model';
import { BATCH_ACTIVITY_START_TO_CLOSE, HEARTBEAT_TIMEOUT } from './timeouts';

/** Keys a page checks: a GET each, so a page ends well within its activity's bound at the service's pace. */
const PAGE = 100;
/** History length after which the check goes on as new, carrying what it found. */
const MAX_HISTORY = 5_000;

// The page's activity waits out the service's Retry-After as its own retries (its next attempt goes on from the key
// it stopped at); a batch stop (401, 403) or a store that is not the command's ends it.
const { checkLedgerKeys } = proxyActivities<Activities>({
  startToCloseTimeout: BATCH_ACTIVITY_START_TO_CLOSE,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

export interface LedgerCheckWorkflowInput extends LedgerCheckScope {
  /** @internal Carried across continue-as-new. */
  carried?: { after: number; summary: LedgerCheckSummary };
}

/** `imagebatch ledger check`: every key of the store (or of one batch) against the service, page by page. */
export async function ledgerCheckWorkflow(input: LedgerCheckWorkflowInput): Promise<LedgerCheckSummary> {
  const summary: LedgerCheckSummary = input.carried?.summary ?? {
    checked: 0,
    agree: 0,
    withoutCreation: 0,
    findingCount: 0,
    findings: [],
  };
  const { carried: _carried, ...scope } = input;
  for (let after = input.carried?.after ?? 0; ;) {
    const page = await checkLedgerKeys({ ...scope, after, max: PAGE });
    summary.checked += page.checked;
    summary.agree += page.agree;
    summary.withoutCreation += page.withoutCreation;
    summary.findingCount += page.findings.length;
    summary.findings.push(...page.findings.slice(0, MAX_FINDINGS_LISTED - summary.findings.length));
    if (page.done) return summary;
    after = page.next;
    if (workflowInfo().historyLength > MAX_HISTORY) {
      return continueAsNew<typeof ledgerCheckWorkflow>({ ...scope, carried: { after, summary } });
    }
  }
}
