/**
 * What an image is, from its first bytes (its magic number): never from a Content-Type, a file name or what a
 * record says. Used to name a downloaded file (`src/activities/download.ts`) and to recognise an image carried
 * inline in a creation record as base64 (`src/api/schemas.ts`).
 */

/** Bytes looked at to recognise a type (an AVIF file's `ftyp` box lists its brands in its first bytes). */
export const SNIFF_BYTES = 64;

/** The media type of each extension {@link sniffImageType} gives. */
export const IMAGE_MEDIA_TYPES: Readonly<Record<string, string>> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  avif: 'image/avif',
};

/**
 * The type of an image from its first bytes, as a file extension: `png`, `jpg`, `gif`, `webp` or `avif`. `null`
 * when the bytes are none of them; `undefined` when more bytes could still make them one (and `complete` is false:
 * there are none to come).
 */
export function sniffImageType(head: Buffer, complete: boolean): string | null | undefined {
  const starts = (sig: readonly number[], at = 0) => {
    const have = head.subarray(at, at + sig.length);
    return sig.every((b, i) => i >= have.length || have[i] === b)
      ? have.length >= sig.length
        ? true
        : undefined
      : false;
  };
  const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));
  const checks: (() => string | false | undefined)[] = [
    () => starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]) && 'png',
    () => starts([0xff, 0xd8, 0xff]) && 'jpg',
    () => {
      const a = starts(ascii('GIF87a'));
      const b = starts(ascii('GIF89a'));
      return a === true || b === true ? 'gif' : a === undefined || b === undefined ? undefined : false;
    },
    () => {
      const riff = starts(ascii('RIFF'));
      if (riff !== true) return riff;
      return starts(ascii('WEBP'), 8) && 'webp';
    },
    () => {
      // An ISO-BMFF `ftyp` box whose major or compatible brands include avif (still) or avis (sequence).
      const ftyp = starts(ascii('ftyp'), 4);
      if (ftyp !== true) return ftyp;
      const size = head.readUInt32BE(0);
      const end = Math.min(size >= 16 ? size : 16, head.length);
      for (let at = 8; at + 4 <= end; at += 4) {
        if (at === 12) continue; // the minor version
        const brand = head.subarray(at, at + 4).toString('latin1');
        if (brand === 'avif' || brand === 'avis') return 'avif';
      }
      return head.length >= Math.min(size, SNIFF_BYTES) ? false : undefined;
    },
  ];
  let pending = false;
  for (const check of checks) {
    const r = check();
    if (typeof r === 'string') return r;
    if (r === undefined) pending = true;
  }
  return pending && !complete ? undefined : null;
}
