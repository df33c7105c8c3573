import { API_KEY_TAIL } from '../api/contract';

/**
 * Keys never come from the command line: an argument is visible to every user of the machine in the process
 * list, and is kept in shell history. The CLI refuses, before doing anything else, any option whose name says it
 * carries a secret (`--api-key`, `--token`, `--payload-key`, ...) and any argument that holds something shaped
 * like an image-service key, whatever the command. The message names the option but never shows its value.
 */

/** Option names (lower case, `_` as `-`) that carry a secret: `--api-key`, `--imagegen-api-key`, `--token`... */
const SECRET_OPTION_NAME = /(?:^|-)(?:api-?key|key|token|secret|password|passwd|credentials?|authorization|bearer)$/;
/** The contract's key format anywhere in an argument: `live_` and 40 letters or digits. */
const KEY_SHAPE = new RegExp(API_KEY_TAIL.source.replace(/\$$/, ''));

const WHERE_KEYS_GO =
  "set the image service key in IMAGEGEN_API_KEY or IMAGEGEN_API_KEY_FILE in the worker's environment " +
  '(the payload encryption key in IMAGEBATCH_PAYLOAD_KEY or IMAGEBATCH_PAYLOAD_KEY_FILE, a Temporal Cloud key ' +
  'in TEMPORAL_API_KEY)';

/** Why these arguments (without `node` and the script) are refused, or undefined when none carries a key. */
export function secretArgumentProblem(args: readonly string[]): string | undefined {
  for (const [i, arg] of args.entries()) {
    if (KEY_SHAPE.test(arg)) {
      return `argument ${i + 1} looks like an API key and was refused (not shown): keys are never taken from the command line; ${WHERE_KEYS_GO}`;
    }
    const option = /^--?([^=]+)/.exec(arg)?.[1];
    if (option === undefined) continue;
    const name = option.toLowerCase().replace(/_/g, '-');
    if (SECRET_OPTION_NAME.test(name)) {
      return `the option --${name} was refused (its value is not shown): keys are never taken from the command line; ${WHERE_KEYS_GO}`;
    }
  }
  return undefined;
}
