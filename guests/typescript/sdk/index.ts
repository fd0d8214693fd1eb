/// <reference path="../types/generated/actor-world.d.ts" />
/// <reference path="./starlingmonkey.d.ts" />
/**
 * Sluice guest SDK for TypeScript.
 *
 *   import { host, register, type Envelope } from "@sluice/guest";
 *   export const actor = register({ handle: (env: Envelope) => env.payload });
 *
 * The package ships TypeScript source (ESM): `sluice build` bundles it into the component, and
 * `tsc --noEmit` type-checks an actor against it (with `allowImportingTsExtensions`). The
 * reference above brings the `sluice:actor/*` declarations the SDK imports.
 */
export {
  host, outbox, bus, toBytes, dispatchResultOf, Call, DEFAULT_ASK_TIMEOUT_MS, DEFAULT_DISPATCH_MSG_TYPE,
} from "./host.ts";
export type { Payload, DispatchOptions, DispatchOutcome, DispatchResult, CallOptions } from "./host.ts";
export { register, Envelope, abort, Abort, uncoded } from "./actor.ts";
export type { Actor, ActorExport } from "./actor.ts";
export {
  SluiceError, ResourceExhausted, DeadlineExceeded, Overloaded, NotFound, InvalidArgument,
  Unavailable, Internal, fromWit, toWit, CODES, prefix,
} from "./errors.ts";
export type { ErrorDetails } from "./errors.ts";
export { encodeUtf8, decodeUtf8 } from "./utf8.ts";
