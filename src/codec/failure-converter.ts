import { DefaultFailureConverter } from '@temporalio/common';

/**
 * The failure converter of an encrypting worker (`failureConverterPath`): failure messages and stack traces go
 * into an encoded payload, which the codec then encrypts, because a failure's text can quote a prompt or a
 * service answer. Loaded by path in the workflow sandbox too, so it imports nothing but `@temporalio/common`.
 */
export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
