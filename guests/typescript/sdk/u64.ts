/**
 * WIT `u64` values cross as `bigint` under StarlingMonkey (componentize-js) but as `number`
 * under QuickJS (componentize-qjs). The build defines `__SLUICE_U64_AS_NUMBER__` for QuickJS.
 */
declare const __SLUICE_U64_AS_NUMBER__: boolean | undefined;

const AS_NUMBER = typeof __SLUICE_U64_AS_NUMBER__ !== "undefined" && __SLUICE_U64_AS_NUMBER__;

/** A non-negative integer as the engine's u64 representation. */
export function u64(n: number | bigint): bigint {
  return (AS_NUMBER ? Number(n) : BigInt(n)) as bigint;
}
