/// <reference path="./sluice-actor-types.d.ts" />
declare module 'sluice:actor/outbox@0.1.0' {
  /**
   * Record one message per target durably, then try each target once within the relay's
   * current concurrency limit.
   */
  export function dispatch(req: DispatchRequest): DispatchResult;
  /**
   * Direct tell first; on any failure store the message in the outbox.
   */
  export function tellReliable(to: string, msgType: string, payload: Uint8Array): DeliveryPath;
  /**
   * A durable reminder: `msg-type` with `payload`, delivered to this actor itself once
   * `delay-ms` has passed. Stored before this returns, it outlives the activation, a host
   * crash or restart and a handoff in a cluster (unlike `host.schedule`, which is in memory).
   * At least once: after a crash it may arrive twice. A non-empty `name` (at most 256 bytes)
   * names it for this actor, and arming that name again replaces the pending one; an empty
   * name arms a new one each time. Fails with `resource-exhausted` when this actor already has
   * `max_reminders_per_actor` pending, `unavailable` on a host without an outbox.
   */
  export function remind(name: string, delayMs: bigint, msgType: string, payload: Uint8Array): void;
  /**
   * Cancel this actor's pending reminder `name`: true when one was pending, false when none
   * was (it never existed, was cancelled, or is already being delivered).
   */
  export function cancelReminder(name: string): boolean;
  export type ActorError = import('sluice:actor/types@0.1.0').ActorError;
  export type DispatchRequest = import('sluice:actor/types@0.1.0').DispatchRequest;
  export type DispatchResult = import('sluice:actor/types@0.1.0').DispatchResult;
  export type DeliveryPath = import('sluice:actor/types@0.1.0').DeliveryPath;
}
