/// <reference path="./sluice-actor-types.d.ts" />
declare module 'sluice:actor/actor@0.1.0' {
  /**
   * Called once per activation with the `init` table of the app config, as JSON.
   */
  export function init(config: string): void;
  /**
   * One turn: handle one message and return the reply payload.
   */
  export function handle(env: Envelope): Uint8Array;
  export type ActorError = import('sluice:actor/types@0.1.0').ActorError;
  export type Envelope = import('sluice:actor/types@0.1.0').Envelope;
}
