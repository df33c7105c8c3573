// The SDK's `Duration` is `StringValue | number`, with `StringValue` from `ms` (a dependency of @temporalio/common).
// `ms` ships its types in dist/index.d.ts, but its package.json `exports` does not lead node16 resolution to them, so
// `Duration` would be an error type. Its one type, as that file declares it; imagebatch never calls `ms` itself.
declare module 'ms' {
  /** A duration such as `90s`, `45m`, `1.5 hours`: a number, then a unit (a bare number is milliseconds). */
  export type StringValue = `${number}` | `${number}${string}`;
}
