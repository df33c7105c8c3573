import { z } from 'zod';

/**
 * How the files port serves images (config `files`): contract-defaults.md's default serves `/files/<creation>-<n>.png` as
 * `image/png` for as long as the creation is kept. A service's CDN may instead redirect to the file, call it
 * `application/octet-stream`, and let it expire soon after the creation ended.
 */
export const filesConfigSchema = z
  .strictObject({
    /** `/files/<creation>-<n>.png` answers 302 to `/blob/<creation>-<n>.png`, which serves the file. */
    redirect: z.boolean().default(false),
    /** The Content-Type the file is served with. */
    contentType: z.enum(['image/png', 'application/octet-stream']).default('image/png'),
    /** The file (and its redirect) is gone this long after the creation ended; null: never. */
    expireAfterMs: z.number().int().positive().nullable().default(null),
    /** What an expired file answers. */
    expiredStatus: z.union([z.literal(404), z.literal(410)]).default(410),
  })
  .prefault({});

export type FilesConfig = z.output<typeof filesConfigSchema>;
