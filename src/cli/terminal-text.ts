/* eslint-disable no-control-regex -- matching control characters is the point of this file */

/**
 * Text from elsewhere (the image service's top-up URL, reasons, messages, model names; a row's note) made safe for
 * one line of a terminal: an escape sequence in it would run there (OSC 52 writes the clipboard, `ESC [2K` and CR
 * erase the line a person reads). Whole sequences go: CSI, OSC, DCS, SOS, PM, APC (7-bit `ESC x` and 8-bit C1
 * forms) and any other `ESC` sequence; then every C0 control, DEL, C1 control and bidi override (U+202A-U+202E,
 * U+2066-U+2069: they reorder what follows). A line break or tab becomes a space, so that words stay apart; the rest
 * disappears.
 */

/** A string sequence (OSC, DCS, SOS, PM, APC) up to its terminator (BEL, ESC \ or ST), or to the end of the text. */
const STRING_SEQUENCE = /(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[\s\S]*?(?:\x07|\x1b\\|\x9c|$)/g;
/** A control sequence: CSI, parameters, intermediates, final byte. */
const CONTROL_SEQUENCE = /(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?/g;
/** Any other escape: ESC, intermediates, a final byte. */
const OTHER_ESCAPE = /\x1b[\x20-\x2f]*[\x30-\x7e]?/g;
const SPACING = /[\t\n\v\f\r\u2028\u2029]+/g;
const CONTROLS = /[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g;

/** `s` without escape sequences or control characters, on one line. */
export function terminalText(s: string): string {
  return s
    .replace(STRING_SEQUENCE, '')
    .replace(CONTROL_SEQUENCE, '')
    .replace(OTHER_ESCAPE, '')
    .replace(SPACING, ' ')
    .replace(CONTROLS, '');
}

/** Zero-width code points: combining marks, and (by code point, below) joiners and variation selectors. */
const COMBINING = /^[\p{Mn}\p{Me}]$/u;
/** Code points a terminal draws two columns wide: East Asian wide and full-width forms, and emoji pictographs. */
const DOUBLE_WIDTH =
  /^[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{1f300}-\u{1f64f}\u{1f900}-\u{1f9ff}\u{20000}-\u{3fffd}]$/u;

function charWidth(c: string): number {
  const code = c.codePointAt(0) ?? 0;
  const joinerOrSelector = (code >= 0x200b && code <= 0x200f) || code === 0x2060 || (code >= 0xfe00 && code <= 0xfe0f);
  if (joinerOrSelector || COMBINING.test(c)) return 0;
  return DOUBLE_WIDTH.test(c) ? 2 : 1;
}

/** The columns `s` takes on a terminal; `s` is text without escapes or controls (see {@link terminalText}). */
export function terminalWidth(s: string): number {
  let width = 0;
  for (const c of s) width += charWidth(c);
  return width;
}

/** `s` cut to at most `columns` columns of a terminal, ending in `…` when something was cut. */
export function fitWidth(s: string, columns: number): string {
  if (terminalWidth(s) <= columns) return s;
  let out = '';
  let width = 0;
  for (const c of s) {
    const w = charWidth(c);
    if (width + w > columns - 1) break;
    out += c;
    width += w;
  }
  return columns > 0 ? `${out}…` : '';
}
