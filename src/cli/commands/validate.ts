import { validateBatchFile, type BatchReport } from '../../batch';

export interface ValidateOptions {
  file: string;
  /** Model of rows that name none. */
  defaultModel?: string;
}

/** `imagebatch validate FILE`: every problem of the file with its line; nothing is started or charged. */
export async function validate(options: ValidateOptions): Promise<BatchReport> {
  return validateBatchFile(options.file, options.defaultModel ? { defaultModel: options.defaultModel } : {});
}
