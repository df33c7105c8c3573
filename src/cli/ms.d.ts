// `ms` (the SDK's duration parser) ships its types in dist/index.d.ts, but its package.json `exports` does not lead
// node16 resolution to them: its API as that file declares it (units left open: `ms` checks them).
declare module 'ms' {
  /** A duration such as `90s`, `45m`, `1.5 hours`: a number, then a unit (a bare number is milliseconds). */
  export type StringValue = `${number}` | `${number}${string}`;
  /** Milliseconds of a duration string (NaN when it is not one), or a number of milliseconds as a short string. */
  function ms(value: StringValue, options?: { long?: boolean }): number;
  function ms(value: number, options?: { long?: boolean }): string;
  export default ms;
}
