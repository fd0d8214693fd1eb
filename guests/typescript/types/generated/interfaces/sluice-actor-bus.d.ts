/// <reference path="./sluice-actor-types.d.ts" />
declare module 'sluice:actor/bus@0.1.0' {
  /**
   * Publish to a topic (`a.b.c`, at most 20 segments) on behalf of the current principal.
   */
  export function publish(topic: string, payload: Uint8Array): void;
  export type ActorError = import('sluice:actor/types@0.1.0').ActorError;
}
