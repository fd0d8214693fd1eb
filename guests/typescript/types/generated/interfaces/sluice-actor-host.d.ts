/// <reference path="./sluice-actor-types.d.ts" />
declare module 'sluice:actor/host@0.1.0' {
  /**
   * Fire and forget. Fails at once with `resource-exhausted` on a full `error` mailbox.
   */
  export function tell(to: string, msgType: string, payload: Uint8Array): TellReceipt;
  /**
   * Request and reply. `timeout-ms` is this call's deadline: it only tightens the deadline
   * inherited from the current turn, and must be positive.
   */
  export function ask(to: string, msgType: string, payload: Uint8Array, timeoutMs: bigint): Uint8Array;
  /**
   * Deliver `msg-type` with `payload` to this actor itself after `delay-ms`.
   */
  export function schedule(delayMs: bigint, msgType: string, payload: Uint8Array): void;
  /**
   * This actor's id, `Type/key`.
   */
  export function selfId(): string;
  /**
   * Wall-clock milliseconds since the Unix epoch.
   */
  export function nowMs(): bigint;
  export function log(level: LogLevel, msg: string): void;
  export type ActorError = import('sluice:actor/types@0.1.0').ActorError;
  export type TellReceipt = import('sluice:actor/types@0.1.0').TellReceipt;
  export type LogLevel = import('sluice:actor/types@0.1.0').LogLevel;
}
