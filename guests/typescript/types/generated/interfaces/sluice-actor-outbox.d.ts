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
  export type ActorError = import('sluice:actor/types@0.1.0').ActorError;
  export type DispatchRequest = import('sluice:actor/types@0.1.0').DispatchRequest;
  export type DispatchResult = import('sluice:actor/types@0.1.0').DispatchResult;
  export type DeliveryPath = import('sluice:actor/types@0.1.0').DeliveryPath;
}
