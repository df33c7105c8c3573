/* eslint-disable no-control-regex -- matching control characters is the point of this file */

/**
 * Text from elsewhere (the image service's top-up URL, reasons, messages, model names; a row's note) made safe for
 * one line of a terminal: an escape sequence in it would run there (OSC 52 writes the clipboard, `ESC [2K` and CR
 * erase the line a person reads). Whole sequences go: CSI, OSC, DCS, SOS, PM, APC (7-bit `ESC x` and 8-bit C1
 * forms) and any other `ESC` sequence; then every C0 control, DEL and C1 control. A line break or tab becomes a
 * space, so that words stay apart; the rest disappears.
 */

/** A string sequence (OSC, DCS, SOS, PM, APC) up to its terminator (BEL, ESC \ or ST), or to the end of the text. */
const STRING_SEQUENCE = /(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[\s\S]*?(?:\x07|\x1b\\|\x9c|$)/g;
/** A control sequence: CSI, parameters, intermediates, final byte. */
const CONTROL_SEQUENCE = /(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?/g;
/** Any other escape: ESC, intermediates, a final byte. */
const OTHER_ESCAPE = /\x1b[\x20-\x2f]*[\x30-\x7e]?/g;
const SPACING = /[\t\n\v\f\r\u2028\u2029]+/g;
const CONTROLS = /[\x00-\x1f\x7f-\x9f]/g;

/** `s` without escape sequences or control characters, on one line. */
export function terminalText(s: string): string {
  return s
    .replace(STRING_SEQUENCE, '')
    .replace(CONTROL_SEQUENCE, '')
    .replace(OTHER_ESCAPE, '')
    .replace(SPACING, ' ')
    .replace(CONTROLS, '');
}
