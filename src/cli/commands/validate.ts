import type { Client } from '@temporalio/client';
import type { ModelInfo } from '../../activities/types';
import { validateBatchFile, type BatchReport } from '../../batch';
import { modelCatalogWorkflow } from '../../workflows';

export interface ValidateOptions {
  file: string;
  /** Model of rows that name none. */
  defaultModel?: string;
  /**
   * Check the models against the account's catalog and estimate the cost, through a running worker (it holds
   * the API key). Without it, only the file is checked.
   */
  catalog?: { client: Client; taskQueue: string };
}

export interface ModelCheck {
  model: string;
  rows: number;
  images: number;
  available: boolean;
  priceUsd?: number;
}

export interface ValidateResult {
  report: BatchReport;
  /** Present when the catalog was checked. */
  models?: ModelCheck[];
  /** USD if every row succeeds at its first attempt; undefined when a price is unknown. */
  estimatedCostUsd?: number;
  /** False when the file has problems or uses a model the account lacks. */
  ok: boolean;
}

/** `imagebatch validate FILE`: every problem of the file with its line; nothing is started or charged. */
export async function validate(options: ValidateOptions): Promise<ValidateResult> {
  const report = await validateBatchFile(
    options.file,
    options.defaultModel ? { defaultModel: options.defaultModel } : {},
  );
  if (!options.catalog) return { report, ok: report.ok };
  const catalog = await options.catalog.client.workflow.execute(modelCatalogWorkflow, {
    taskQueue: options.catalog.taskQueue,
    workflowId: `catalog/${Date.now()}`,
    workflowExecutionTimeout: '2 minutes',
  });
  const byId = new Map<string, ModelInfo>(catalog.map((m) => [m.id, m]));
  const models: ModelCheck[] = Object.entries(report.models).map(([model, usage]) => {
    const found = byId.get(model);
    return {
      model,
      rows: usage.rows,
      images: usage.images,
      available: found !== undefined,
      ...(found?.priceUsd === undefined ? {} : { priceUsd: found.priceUsd }),
    };
  });
  const priced = models.every((m) => m.priceUsd !== undefined);
  const estimate = models.reduce((sum, m) => sum + (m.priceUsd ?? 0) * m.images, 0);
  return {
    report,
    models,
    ...(priced ? { estimatedCostUsd: Math.round(estimate * 1e6) / 1e6 } : {}),
    ok: report.ok && models.every((m) => m.available),
  };
}
