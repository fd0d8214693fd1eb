declare module 'sluice:actor/types@0.1.0' {
  /**
   * What went wrong, as a stable code SDKs turn into typed errors.
   * # Variants
   * 
   * ## `"resource-exhausted"`
   * 
   * The receiver has no room: a full `error`-strategy mailbox, a rate limit, a memory
   * limit. `retry-after-ms` says when trying again is likely to succeed.
   * ## `"deadline-exceeded"`
   * 
   * The call's deadline passed. `skipped` tells whether the turn never ran.
   * ## `"overloaded"`
   * 
   * An admission cap refused the call; `overload` carries scope, depth and limit.
   * ## `"not-found"`
   * 
   * No such actor type (or module) on this host.
   * ## `"invalid-argument"`
   * 
   * The request itself is wrong: oversize payload, bad topic, bad deadline.
   * ## `"unavailable"`
   * 
   * The actor (or a subsystem) cannot serve now: stopped by its supervisor,
   * or a capability this host does not provide.
   * ## `"internal"`
   * 
   * The callee failed: a trap, or an error a guest raised without a code of its own.
   */
  export type ErrorCode = 'resource-exhausted' | 'deadline-exceeded' | 'overloaded' | 'not-found' | 'invalid-argument' | 'unavailable' | 'internal';
  /**
   * Which admission cap refused a call.
   * # Variants
   * 
   * ## `"actor"`
   * 
   * The target actor's own queue cap (`max_queued`).
   * ## `"host"`
   * 
   * The host-wide cap on in-flight turns (`max_inflight_turns`).
   */
  export type OverloadScope = 'actor' | 'host';
  /**
   * Details of an `overloaded` refusal.
   */
  export interface OverloadInfo {
    scope: OverloadScope,
    /**
     * Queued plus running turns at the moment of refusal.
     */
    depth: bigint,
    /**
     * The cap that was hit.
     */
    limit: bigint,
  }
  /**
   * The error every fallible import and export returns. `message` is the canonical,
   * human-readable string, e.g. `RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)`.
   */
  export interface ActorError {
    code: ErrorCode,
    message: string,
    retryAfterMs?: bigint,
    /**
     * For `deadline-exceeded`: true when the queued turn was skipped and never ran.
     */
    skipped: boolean,
    overload?: OverloadInfo,
  }
  /**
   * One message as an actor receives it.
   */
  export interface Envelope {
    /**
     * Sender actor id (`Type/key`), or none for an external caller or the host.
     */
    sender?: string,
    msgType: string,
    payload: Uint8Array,
    /**
     * Who the work is done for (`system` when nobody said).
     */
    principal: string,
    /**
     * Milliseconds left of the call's deadline when the turn started; none = no deadline.
     */
    deadlineMs?: bigint,
  }
  /**
   * What became of a `tell`: whether the mailbox strategy had to drop something.
   * # Variants
   * 
   * ## `"queued"`
   * 
   * The message is in the receiver's mailbox.
   * ## `"displaced-oldest"`
   * 
   * Queued, but the mailbox was full and its `drop-oldest` strategy discarded the
   * oldest queued message to make room.
   * ## `"dropped-newest"`
   * 
   * The mailbox was full and its `drop-newest` strategy discarded this message.
   */
  export type TellReceipt = 'queued' | 'displaced-oldest' | 'dropped-newest';
  /**
   * How `tell-reliable` delivered.
   * # Variants
   * 
   * ## `"direct"`
   * 
   * Straight into the receiver's mailbox.
   * ## `"outbox"`
   * 
   * Stored durably in the outbox; the relay will deliver it.
   */
  export type DeliveryPath = 'direct' | 'outbox';
  /**
   * How an outbox message counts as delivered.
   * # Variants
   * 
   * ## `"cast"`
   * 
   * Delivered once it is in the receiver's mailbox (fire and forget).
   * ## `"call"`
   * 
   * Delivered once the receiver's handler returned success; handler errors are retried.
   */
  export type DispatchMode = 'cast' | 'call';
  /**
   * What a repeated idempotency key means.
   * # Variants
   * 
   * ## `"append"`
   * 
   * A repeated key is a duplicate and is stored once (the default).
   * ## `"overwrite"`
   * 
   * Last write wins: the pending message with the same key is replaced, unless the
   * stored sequence number is newer.
   */
  export type Conflict = 'append' | 'overwrite';
  /**
   * What `dispatch` did with one target. Only `delivered` means the receiver has it now;
   * every `queued-*` target is stored and the relay will deliver it (nothing to resend);
   * `not-found`, `expired` and `dead-lettered` targets are in the dead-letter queue and
   * will never be delivered unless replayed from it.
   * # Variants
   * 
   * ## `"delivered"`
   * 
   * Delivered by the immediate attempt: in the receiver's mailbox (cast) or handled
   * successfully (call).
   * ## `"deduplicated"`
   * 
   * Absorbed by its idempotency key (an `append` duplicate, an `overwrite` replacement
   * or a stale `overwrite`): nothing more happens for this target.
   * ## `"queued-behind-pending"`
   * 
   * Left for the relay: an earlier message to the same receiver is pending, and
   * delivering this one now would overtake it. It follows in order.
   * ## `"queued-at-limit"`
   * 
   * Left for the relay: the relay's concurrency limit for the receiver's actor type had
   * no free permit. Many of these mean the receivers are the bottleneck.
   * ## `"queued-refused"`
   * 
   * Left for the relay: the receiver refused for capacity (full mailbox, admission or
   * activation cap). Retried after its hint; never counts toward max attempts.
   * ## `"queued-failed"`
   * 
   * Left for the relay: the attempt failed in a way that may pass (the handler returned
   * an error, the actor was restarting). Retried with backoff up to max attempts.
   * ## `"queued-out-of-time"`
   * 
   * Left for the relay: this turn's deadline had passed before the attempt, or passed
   * during it. Give dispatch more time if you want immediate delivery.
   * ## `"not-found"`
   * 
   * Dead-lettered at once: there is no actor type of the receiver's name. Check the
   * target id.
   * ## `"expired"`
   * 
   * Dead-lettered at once: its ttl had already passed.
   * ## `"dead-lettered"`
   * 
   * Dead-lettered at once for another permanent failure (a malformed receiver id, or a
   * failure when only one attempt is allowed); the dead-letter entry says why.
   */
  export type DispatchOutcome = 'delivered' | 'deduplicated' | 'queued-behind-pending' | 'queued-at-limit' | 'queued-refused' | 'queued-failed' | 'queued-out-of-time' | 'not-found' | 'expired' | 'dead-lettered';
  /**
   * What `dispatch` did: counts by kind and one outcome per target.
   * `delivered + deduplicated + queued + dead-lettered` equals the number of targets.
   */
  export interface DispatchResult {
    /**
     * Targets delivered by the immediate attempt.
     */
    delivered: number,
    /**
     * Targets absorbed by their idempotency key.
     */
    deduplicated: number,
    /**
     * Targets left in the outbox for the relay (every `queued-*` outcome).
     */
    queued: number,
    /**
     * Targets dead-lettered at once (`not-found`, `expired`, `dead-lettered`).
     */
    deadLettered: number,
    /**
     * One outcome per target, in the order of the request's `targets`.
     */
    outcomes: Array<DispatchOutcome>,
  }
  /**
   * A durable fan-out request.
   */
  export interface DispatchRequest {
    /**
     * Opaque context (JSON with `tenant` and `namespace`; empty = defaults).
     */
    context: string,
    /**
     * Who dispatches; recorded with each message and used as its sender.
     */
    dispatcherId: string,
    /**
     * The message type the receivers' handlers see.
     */
    msgType: string,
    targets: Array<string>,
    payload: Uint8Array,
    mode: DispatchMode,
    /**
     * Empty = no key (every dispatch is a new message).
     */
    idempotencyKey: string,
    conflict: Conflict,
    /**
     * Orders overwrites; none = the host assigns an increasing number.
     */
    sequenceNumber?: bigint,
    /**
     * Time to live; an expired message is dead-lettered, never delivered.
     */
    ttlMs?: bigint,
  }
  /**
   * Log severity.
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}
