import { z } from 'zod';
import {
  CODEC_TOKEN_ENV,
  CODEC_TOKEN_MIN_LENGTH,
  codecTokenFromEnv,
  ChainedPayloadCodec,
  codecChain,
  parseAllowedOrigin,
  payloadCodecsFromEnv,
  startCodecServer,
} from '../../codec';
import { PAYLOAD_KEY_ENV, PAYLOAD_KEY_FILE_ENV } from '../../config/codec-config';
import { PAYLOAD_COMPRESSION_ENV } from '../../config/compression-config';
import { defineCommand } from '../command';
import { OptionError } from '../errors';
import { port, repeated } from '../options';
import { aborted } from './simulator';

/** One `--allow-origin` value, checked as an http(s) origin, added to those before it. */
function addOrigin(value: string, previous: string[] = []): string[] {
  try {
    return [...previous, parseAllowedOrigin(value)];
  } catch (err) {
    throw new OptionError('--allow-origin', err instanceof Error ? err.message : String(err));
  }
}

/** `imagebatch codec-server`: the Web UI's codec endpoint, until Ctrl-C. */
export const codecServerCommand = defineCommand({
  name: 'codec-server',
  description:
    `Serve /encode and /decode for the Temporal Web UI with the payload keys of ${PAYLOAD_KEY_ENV} (on 127.0.0.1); ` +
    `with ${PAYLOAD_COMPRESSION_ENV}=on alone, compressed payloads only`,
  summary: 'Decode payloads for the Temporal Web UI',
  options: [
    { flags: '--port <n>', description: 'port on 127.0.0.1 (0: any free port)', default: '8888' },
    {
      flags: '--allow-origin <url...>',
      description: 'Web UI origins allowed by CORS, http(s)://host[:port] (default: the dev server UI on port 8233)',
    },
  ],
  helpAfter:
    `\nRequests must name the server's own Host (localhost, 127.0.0.1 or [::1] with its port) and\n` +
    `carry its token: give the Web UI the endpoint printed at start (http://127.0.0.1:<port>/<token>),\n` +
    `or send Authorization: Bearer <token>. The token is new at each start, or the value of\n` +
    `${CODEC_TOKEN_ENV} (at least ${CODEC_TOKEN_MIN_LENGTH} characters).`,
  schema: z.object({ port, allowOrigin: repeated(addOrigin) }),
  async run(opts, { stdout, stderr, env, signal }) {
    const codecs = payloadCodecsFromEnv(env);
    // Without a key there is something to decode only where payloads are compressed.
    if (!codecs.encryption && !codecs.compression.compress) {
      throw new Error(
        `set ${PAYLOAD_KEY_ENV} or ${PAYLOAD_KEY_FILE_ENV} (or ${PAYLOAD_COMPRESSION_ENV}=on): the codec server ` +
          `needs the key`,
      );
    }
    const codec = new ChainedPayloadCodec(codecChain(codecs));
    const { token, generated } = codecTokenFromEnv(env);
    const started = await startCodecServer({
      codec,
      port: opts.port,
      token,
      ...(opts.allowOrigin ? { allowOrigins: opts.allowOrigin } : {}),
    });
    const keys = codecs.encryption ? `key id ${codecs.encryption.keyId}` : `no payload key: compressed payloads only`;
    stdout(`codec server: ${started.url} (${keys}; Ctrl-C stops it)\n`);
    // The token once, on stderr (not in a log of stdout), as the one line a person copies into the Web UI.
    stderr(
      generated
        ? `codec endpoint for the Web UI's codec server setting (holds a new token; shown once): ${started.endpoint}\n`
        : `codec endpoint for the Web UI's codec server setting: ${started.url}/<the token in ${CODEC_TOKEN_ENV}>\n`,
    );
    await aborted(signal);
    await started.close();
  },
});
