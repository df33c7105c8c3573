import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { DEMO_API_KEY } from '../../src/simulator';
import { workflowBundle } from '../helpers/temporal';

/**
 * Replay: the recorded histories of real runs (test/replay/histories, re-recorded by record-histories.ts) must
 * replay through the current workflow code without nondeterminism. A change to the workflows that would break
 * running workflows fails here; such a change goes behind `patched()`.
 */
const HISTORIES_DIR = path.join(__dirname, 'histories');
const EXPECTED = [
  'prompt-happy-path',
  'prompt-retryable-failure',
  'prompt-503-refunded',
  'prompt-batch-stop-resume',
  'prompt-max-wait',
  'prompt-cancelled-while-blocked',
  'batch-stop-resume',
  'batch-continue-as-new-run1',
  'batch-continue-as-new-run2',
  'batch-terminated-row-cancelled',
  'batch-carried-row-terminated-last-run',
  'batch-cancel-blocked-row',
  // Recorded after the `ask-batch-before-new-key` patch (a row of a batch asks its batch before a new key).
  'v2-ask-batch-before-new-key-prompt-batch-stop-resume',
  'v2-ask-batch-before-new-key-batch-stop-resume',
  // Recorded after the `one-to-one-keys-and-ledger` patch (keys ib/<batch>/<row>/a<n>; the row's record on disk).
  'v3-one-to-one-keys-and-ledger-prompt-happy-path',
  'v3-one-to-one-keys-and-ledger-prompt-503-refunded',
  'v3-one-to-one-keys-and-ledger-prompt-batch-stop-resume',
  'v3-one-to-one-keys-and-ledger-prompt-cancelled-while-blocked',
  'v3-one-to-one-keys-and-ledger-batch-stop-resume',
  // Recorded after the `prices-known-or-unknown` patch (every batch asks the catalog; the cap reserves known prices).
  'v4-prices-known-or-unknown-batch-stop-resume',
  'v4-prices-known-or-unknown-batch-spend-cap-resume',
  'v4-prices-known-or-unknown-batch-cancel-blocked-row',
  'v4-prices-known-or-unknown-batch-terminated-row-cancelled',
  // Recorded after the `max-wait-says-last-answer` patch (a key out of time says the service's last answer).
  'v5-max-wait-says-last-answer-prompt-max-wait',
  // Recorded after the `row-workflow-ids-fit-255` patch (row workflow ids cut to 255 with the batch's digest).
  'v6-row-workflow-ids-fit-255-batch-long-ids',
  'v6-row-workflow-ids-fit-255-batch-stop-resume',
  'v6-row-workflow-ids-fit-255-batch-continue-as-new-run1',
  'v6-row-workflow-ids-fit-255-batch-continue-as-new-run2',
  // Recorded after the `row-reports-limit` patch (a row whose worker saw a limit bind tells its batch so).
  'v7-row-reports-limit-batch-quota-rows-report-limit',
  'v7-row-reports-limit-prompt-quota-reports-limit',
  'v8-prices-seen-count-batch-price-seen-cap',
  // Recorded after the `stop-loss` patch (a canary row first, unless the settings were proven; breakers) and the
  // `not-sent-keys` patch (a key whose every send failed before a byte left ends not_sent, charged nothing).
  'v9-stop-loss-batch-stop-resume',
  'v9-stop-loss-batch-price-seen-cap',
  'v9-stop-loss-batch-continue-as-new-run1',
  'v9-stop-loss-batch-continue-as-new-run2',
  'v9-not-sent-keys-prompt-not-sent',
  'v9-not-sent-keys-prompt-not-sent-cancelled',
  // Recorded after the `adaptive-window` patch (the window of rows in flight grows, and a reported limit cuts it).
  'v10-adaptive-window-batch-window-grows-then-quota-cuts',
  'v10-adaptive-window-batch-quota-rows-report-limit',
  'v10-adaptive-window-batch-continue-as-new-run1',
  'v10-adaptive-window-batch-continue-as-new-run2',
  // Recorded after the `window-sawtooth` patch (a limit that binds for good no longer starves the window).
  'v11-window-sawtooth-batch-window-grows-then-quota-cuts',
  'v11-row-reports-refused-prompt-quota-reports-limit',
  // Recorded after the `scheduled-run-ends` patch (a scheduled run held by its spend cap ends `paused`).
  'v12-scheduled-run-ends-scheduled-cap-paused',
  // Recorded after the `scheduled-run-budget` patch (a schedule's budget a day: the first run capped by it, the next
  // ending before its batch).
  'v13-scheduled-run-budget-scheduled-budget-capped',
  'v13-scheduled-run-budget-scheduled-budget-spent',
  // Recorded after the `canary-proves-key` patch (the canary sends its key twice; the same creation must come back):
  // a canary whose key the service does not read pauses the batch; the next, on a worker that carries it right, passes.
  'v14-canary-proves-key-batch-stop-resume',
  'v14-canary-proves-key-batch-canary-key-not-honoured',
  'v14-canary-proves-key-prompt-canary-key-not-honoured',
  // Recorded after the `declared-price-one-at-a-time` patch (a cap counting on a price given that no record has
  // confirmed: one row at a time).
  'v15-declared-price-one-at-a-time-batch-declared-price',
];

type History = temporal.api.history.v1.History;

interface Fixture {
  name: string;
  workflowId: string;
  history: History;
  json: unknown;
}

function loadFixtures(): Fixture[] {
  return readdirSync(HISTORIES_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => {
      const json: unknown = JSON.parse(readFileSync(path.join(HISTORIES_DIR, file), 'utf8'));
      const history = temporal.api.history.v1.History.fromObject(json as Record<string, unknown>);
      const started = history.events[0]?.workflowExecutionStartedEventAttributes;
      if (!started?.workflowId) throw new Error(`${file}: the first event is not a workflow start`);
      return { name: file.replace(/\.json$/, ''), workflowId: started.workflowId, history, json };
    });
}

/** Every payload's data in a JSON history, decoded from base64. */
function payloadTexts(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(payloadTexts);
  if (value === null || typeof value !== 'object') return [];
  const record = value as Record<string, unknown>;
  const own =
    typeof record.data === 'string' && 'metadata' in record ? [Buffer.from(record.data, 'base64').toString()] : [];
  return [...own, ...Object.values(record).flatMap(payloadTexts)];
}

describe('replay of recorded histories', () => {
  const fixtures = loadFixtures();

  it('has every recorded scenario, each ending as it should', () => {
    expect(fixtures.map((f) => f.name).sort()).toEqual([...EXPECTED].sort());
    const last = (name: string) => fixtures.find((f) => f.name === name)!.history.events.at(-1)!;
    const { EventType } = temporal.api.enums.v1;
    const hops = [
      'batch-continue-as-new-run1',
      'v6-row-workflow-ids-fit-255-batch-continue-as-new-run1',
      'v9-stop-loss-batch-continue-as-new-run1',
      'v10-adaptive-window-batch-continue-as-new-run1',
    ];
    for (const name of hops) {
      expect(last(name).eventType).toBe(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW);
    }
    for (const name of EXPECTED.filter((n) => !hops.includes(n))) {
      expect({ name, type: last(name).eventType }).toEqual({
        name,
        type: EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
      });
    }
  });

  it("the row-reports-limit histories hold the patch's marker, and the batch's a row's report of the quota", () => {
    const texts = (name: string) => payloadTexts(fixtures.find((f) => f.name === name)!.json);
    expect(texts('v7-row-reports-limit-prompt-quota-reports-limit').some((t) => t.includes('row-reports-limit'))).toBe(
      true,
    );
    expect(texts('v7-row-reports-limit-batch-quota-rows-report-limit')).toContain('{"limit":"concurrency"}');
  });

  it("the stop-loss histories hold the patch's marker, a canary and its proof, and the not-sent row its own", () => {
    const texts = (name: string) => payloadTexts(fixtures.find((f) => f.name === name)!.json);
    const json = (name: string) => JSON.stringify(fixtures.find((f) => f.name === name)!.json);
    expect(texts('v9-stop-loss-batch-stop-resume').some((t) => t.includes('stop-loss'))).toBe(true);
    expect(json('v9-stop-loss-batch-stop-resume')).toContain('"recordServiceProof"');
    expect(json('v9-stop-loss-batch-price-seen-cap')).toContain('"checkServiceProof"');
    expect(texts('v9-not-sent-keys-prompt-not-sent').some((t) => t.includes('not-sent-keys'))).toBe(true);
    expect(texts('v9-not-sent-keys-prompt-not-sent-cancelled').some((t) => t.includes('not-sent-keys'))).toBe(true);
  });

  it("the adaptive-window histories hold the patch's marker, a row's report of the quota, and the window carried", () => {
    const texts = (name: string) => payloadTexts(fixtures.find((f) => f.name === name)!.json);
    for (const name of EXPECTED.filter((n) => n.startsWith('v10-') && !n.endsWith('run2'))) {
      expect({ name, marker: texts(name).some((t) => t.includes('adaptive-window')) }).toEqual({ name, marker: true });
    }
    expect(texts('v10-adaptive-window-batch-window-grows-then-quota-cuts')).toContain('{"limit":"concurrency"}');
    // The second run's input carries the window in the batch's state: no marker, the same window.
    const run2 = texts('v10-adaptive-window-batch-continue-as-new-run2');
    expect(run2.some((t) => t.includes('"window":{"size":'))).toBe(true);
  });

  it("the window-sawtooth history holds the patch's marker and a row's report of the quota", () => {
    const texts = payloadTexts(
      fixtures.find((f) => f.name === 'v11-window-sawtooth-batch-window-grows-then-quota-cuts')!.json,
    );
    expect(texts.some((t) => t.includes('window-sawtooth'))).toBe(true);
    const row = payloadTexts(
      fixtures.find((f) => f.name === 'v11-row-reports-refused-prompt-quota-reports-limit')!.json,
    );
    expect(row.some((t) => t.includes('row-reports-refused'))).toBe(true);
    expect(row).toContain('{"limit":"concurrency","refused":true}');
    expect(texts).toContain('{"limit":"concurrency","refused":true}');
  });

  it("the scheduled-run-ends history holds the patch's marker, the watch, the record, and ends paused", () => {
    const name = 'v12-scheduled-run-ends-scheduled-cap-paused';
    const texts = payloadTexts(fixtures.find((f) => f.name === name)!.json);
    const json = JSON.stringify(fixtures.find((f) => f.name === name)!.json);
    expect(texts.some((t) => t.includes('scheduled-run-ends'))).toBe(true);
    expect(json).toContain('"watchScheduledBatch"');
    expect(json).toContain('"recordScheduledRun"');
    expect(texts.some((t) => t.includes('"outcome":"paused"'))).toBe(true);
  });

  it("the scheduled-run-budget histories hold the patch's marker; the second run starts no batch", () => {
    const fixture = (name: string) => fixtures.find((f) => f.name === name)!.json;
    const capped = payloadTexts(fixture('v13-scheduled-run-budget-scheduled-budget-capped'));
    expect(capped.some((t) => t.includes('scheduled-run-budget'))).toBe(true);
    expect(capped.some((t) => t.includes("what was left of the schedule's budget"))).toBe(true);
    const spent = fixture('v13-scheduled-run-budget-scheduled-budget-spent');
    expect(payloadTexts(spent).some((t) => t.includes('USD a day (UTC) is spent'))).toBe(true);
    expect(JSON.stringify(spent)).not.toContain('START_CHILD_WORKFLOW_EXECUTION_INITIATED');
  });

  it("the canary-proves-key histories hold the patch's marker, the canary's flag, and its second creation", () => {
    const texts = (name: string) => payloadTexts(fixtures.find((f) => f.name === name)!.json);
    for (const name of [
      'v14-canary-proves-key-batch-stop-resume',
      'v14-canary-proves-key-batch-canary-key-not-honoured',
    ]) {
      expect({ name, marker: texts(name).some((t) => t.includes('canary-proves-key')) }).toEqual({
        name,
        marker: true,
      });
      expect({ name, flag: texts(name).some((t) => t.includes('"proveKey":true')) }).toEqual({ name, flag: true });
    }
    const row = texts('v14-canary-proves-key-prompt-canary-key-not-honoured');
    expect(row.some((t) => t.includes('"outcome":"duplicate"') && t.includes('"result":"not_honoured"'))).toBe(true);
  });

  it('the declared-price history holds its marker, and its rows started one at a time', () => {
    const fixture = fixtures.find((f) => f.name === 'v15-declared-price-one-at-a-time-batch-declared-price')!;
    expect(payloadTexts(fixture.json).some((t) => t.includes('declared-price-one-at-a-time'))).toBe(true);
    // Each row starts after the one before has reported its end (its rowDone signal).
    const kinds = fixture.history.events
      .map((e) =>
        e.startChildWorkflowExecutionInitiatedEventAttributes
          ? 'start'
          : e.workflowExecutionSignaledEventAttributes?.signalName === 'rowDone'
            ? 'done'
            : undefined,
      )
      .filter((k) => k !== undefined);
    expect(kinds).toEqual(['start', 'done', 'start', 'done', 'start', 'done']);
  });

  it('the histories hold no API key', () => {
    for (const { name, json } of fixtures) {
      expect({ name, key: payloadTexts(json).some((t) => t.includes(DEMO_API_KEY)) }).toEqual({ name, key: false });
      expect(JSON.stringify(json)).not.toContain(DEMO_API_KEY);
    }
  });

  it('replays every history through the current workflow code without nondeterminism', async () => {
    const replayed: { name: string; error?: string }[] = [];
    const results = Worker.runReplayHistories(
      { workflowBundle: await workflowBundle() },
      fixtures.map(({ workflowId, history }) => ({ workflowId, history })),
    );
    let i = 0;
    for await (const result of results) {
      const name = fixtures[i++]!.name;
      replayed.push({ name, ...(result.error ? { error: String(result.error) } : {}) });
    }
    expect(replayed).toEqual(fixtures.map(({ name }) => ({ name })));
  });
});
