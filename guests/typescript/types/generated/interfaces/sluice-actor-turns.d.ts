/// <reference path="./sluice-actor-types.d.ts" />
declare module 'sluice:actor/turns@0.1.0' {
  /**
   * Ends the running turn with its result (`none` on the first call of a `batch.run`) and
   * starts the next: its envelope, or `none` when the batch is over and `run` must return.
   * The host answers the ended turn's caller before this returns, skips expired messages
   * (answering them `DEADLINE_EXCEEDED` with `skipped`), and gives each turn its own
   * `max_turn_ms`. A message the host did not hand out stays in the mailbox.
   */
  export function next(done: Result<Uint8Array, ActorError> | undefined): Envelope | undefined;
  export type ActorError = import('sluice:actor/types@0.1.0').ActorError;
  export type Envelope = import('sluice:actor/types@0.1.0').Envelope;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
