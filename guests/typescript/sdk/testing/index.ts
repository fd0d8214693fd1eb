/// <reference path="../../types/generated/actor-world.d.ts" />
/**
 * A fake Sluice host for unit tests: run an actor in Node's own test runner, without a host.
 *
 *   import { test } from "node:test";
 *   import assert from "node:assert/strict";
 *   import { FakeHost } from "@sluice/guest/testing";
 *   import { MyActor } from "./app.ts";
 *
 *   test("forward asks the worker", () => {
 *     const fake = new FakeHost({ askReply: '{"done":true}' }).install();
 *     try {
 *       assert.equal(fake.text(new MyActor(), "forward", '{"job":1}'), '{"done":true}');
 *       assert.equal(fake.calls[0]?.to, "Worker/1");
 *     } finally {
 *       fake.uninstall();
 *     }
 *   });
 *
 * Run such tests with `node --import @sluice/guest/testing/register --test app.test.ts`: the
 * hooks it registers load `.ts` files and resolve the SDK's `sluice:actor/*` imports to the
 * installed fake. A failure is scripted with `failNext`: the next fallible call (tell, ask,
 * schedule, dispatch, tellReliable, remind, cancelReminder, publish) throws that error, which
 * reaches the actor as the same typed `SluiceError` the real host's `actor-error` becomes;
 * `failOn({ op, to }, err)` fails the next call of that kind or to that target only.
 *
 * Several actors are tested together by routing their ids to in-process instances:
 *
 *   fake.route("Worker/1", worker);        // an ask to Worker/1 runs worker's turn at once
 *   fake.route("Leader/1", leader);        // a tell or dispatch to Leader/1 waits in fake.queued
 *   fake.handle(leader, "start");          // runs as Leader/1 (host.selfId())
 *   assert.deepEqual(fake.runQueued(), []); // delivers what waits (and what that sends): no error
 *
 * Reminders (`host.outbox.remind`) wait in `fake.reminders`, per actor and name as the host
 * keeps them (arming a name again replaces it, `cancelReminder` removes it), but never fire:
 *
 *   fake.handle(actor, "arm");
 *   const [r] = fake.reminders;             // { actorId, name, delayMs, dueMs, msgType, payload }
 *   fake.handle(actor, r.msgType, r.payload, { sender: r.actorId });   // deliver it by hand
 *
 * The fake is not a host: it has no mailbox bounds, no outbox (no idempotency keys, retries or
 * dead letters, no reminder limit) and no timers; those are the host's, tested against a real one.
 */
import type {
  ActorError, DeliveryPath, DispatchOutcome, DispatchRequest, DispatchResult, LogLevel, TellReceipt,
} from "sluice:actor/types@0.1.0";
import { type Actor, Envelope, uncoded } from "../actor.ts";
import { DeadlineExceeded, SluiceError, toWit } from "../errors.ts";
import { type Payload, dispatchResultOf, toBytes } from "../host.ts";
import { decodeUtf8 } from "../utf8.ts";
import { type WitImports, setImports } from "./imports.ts";

/** Which host import a recorded call went through. */
export type Op = "tell" | "ask" | "schedule" | "dispatch" | "tellReliable" | "remind" | "cancelReminder" | "publish";

/** One host call the actor made, as the host received it (payloads as bytes). */
export interface Call {
  op: Op;
  /** The target actor id; the topic for `publish`; `""` for `schedule`, `dispatch`, `remind`
   * and `cancelReminder`. */
  to: string;
  /** `""` for `cancelReminder` (its payload is empty). */
  msgType: string;
  payload: Uint8Array;
  /** `ask`: the deadline sent, in ms (after the SDK applied `with` and defaults). */
  timeoutMs?: number;
  /** `schedule` and `remind`: the delay, in ms. */
  delayMs?: number;
  /** `remind` and `cancelReminder`: the reminder's name (`""` for an unnamed `remind`). */
  name?: string;
  /** `dispatch`: the WIT request exactly as sent. */
  request?: DispatchRequest;
  /** The routed actor (`FakeHost.route`) whose turn made the call; absent for one not routed. */
  by?: string;
}

/**
 * A message to a routed actor that waits for `FakeHost.runQueued`: a `tell`, a `tellReliable`,
 * or one target of a `dispatch` (its `msgType`, sent by its dispatcher id, as the outbox
 * delivers it).
 */
export interface Queued {
  to: string;
  msgType: string;
  payload: Uint8Array;
  sender: string | null;
}

/** A pending reminder (`FakeHost.reminders`), as `host.outbox.remind` armed it. */
export interface Reminder {
  /** The actor that armed it, whom it is for: its routed id (`FakeHost.route`), else `selfId`. */
  actorId: string;
  /** Its name; `""` for an unnamed one (which no call replaces or cancels). */
  name: string;
  delayMs: number;
  /** When it falls due on the fake clock: `nowMs` when it was armed, plus `delayMs`. */
  dueMs: number;
  msgType: string;
  payload: Uint8Array;
}

/** A queued message whose turn failed (`FakeHost.runQueued` returns them). */
export interface TurnError {
  to: string;
  msgType: string;
  payload: Uint8Array;
  error: SluiceError;
}

/** Which calls `FakeHost.failOn` fails: of this kind, to this target (the topic for `publish`,
 * any of the targets for `dispatch`). */
export interface CallMatch {
  op?: Op;
  to?: string;
}

/**
 * What a fake `ask` answers: a payload (bytes, a string, or a JSON-able value), or a function of
 * the call. (Spelled out rather than `Payload | ...`: `Payload` is `unknown`, which would swallow
 * the function type and leave its parameters untyped.)
 */
export type AskReply =
  | ((to: string, msgType: string, payload: Uint8Array) => Payload)
  | Uint8Array | string | number | boolean | null | object;

/** What a fake `dispatch` answers, one outcome per target in target order: fixed, or a function
 * of the request. The counts are made from them. */
export type DispatchAnswer = readonly DispatchOutcome[] | ((req: DispatchRequest) => readonly DispatchOutcome[]);

/** The fake's answers; every one can also be changed on the fake between calls. */
export interface FakeHostOptions {
  /** `host.selfId()`; default `"MyActor/1"`. */
  selfId?: string;
  /** `host.nowMs()`; default 1000. */
  nowMs?: number;
  /** How far every `host.nowMs()` reading moves the clock on (after the reading), so a
   * busy-wait on the clock ends; default 0 (the clock stands still). */
  tickMs?: number;
  /** What `ask` answers; default `"{}"`. */
  askReply?: AskReply;
  /** What `tell` returns; default `"queued"`. */
  receipt?: TellReceipt;
  /** Where `tellReliable` went; default `"direct"`. */
  deliveryPath?: DeliveryPath;
  /** The per-target outcomes of `dispatch`, or a function of the request; default: every
   * target `"delivered"`. */
  dispatchResult?: DispatchAnswer | null;
}

/** Options of one delivered message (`FakeHost.handle`). */
export interface DeliverOptions {
  sender?: string | null;
  principal?: string;
  deadlineMs?: number | null;
}

/**
 * Stands in for the host between `install()` and `uninstall()`: records the actor's host calls
 * (`calls`, `logs`) and answers them from its fields.
 */
export class FakeHost {
  selfId: string;
  nowMs: number;
  tickMs: number;
  askReply: AskReply;
  receipt: TellReceipt;
  deliveryPath: DeliveryPath;
  dispatchResult: DispatchAnswer | null;
  /** Fallible calls in order (`log`, `selfId` and `nowMs` are not recorded here). */
  calls: Call[] = [];
  /** `[level, message]` per `host.log`. */
  logs: [LogLevel, string][] = [];
  /** Messages to routed actors not delivered yet, oldest first (`runQueued`). */
  queued: Queued[] = [];
  /** Pending reminders, in the order armed: arming a name again replaces that actor's pending
   * one (the new one goes last), `cancelReminder` removes it. None fires on its own (no timers):
   * a test delivers one with `handle(actor, r.msgType, r.payload, { sender: r.actorId })`. */
  reminders: Reminder[] = [];
  private failures: { error: SluiceError | ActorError; match: CallMatch }[] = [];
  private routes = new Map<string, Actor>();
  /** The turns in progress, innermost last: each actor with its routed id (if any). */
  private turns: { actor: Actor; routedAs: string | undefined; principal: string }[] = [];
  private previous: WitImports | null = null;
  private installed = false;

  constructor(opts: FakeHostOptions = {}) {
    this.selfId = opts.selfId ?? "MyActor/1";
    this.nowMs = opts.nowMs ?? 1000;
    this.tickMs = opts.tickMs ?? 0;
    this.askReply = opts.askReply ?? "{}";
    this.receipt = opts.receipt ?? "queued";
    this.deliveryPath = opts.deliveryPath ?? "direct";
    this.dispatchResult = opts.dispatchResult ?? null;
  }

  /** The next fallible calls throw these errors, one call each, in order. */
  failNext(...errors: (SluiceError | ActorError)[]): void {
    this.failures.push(...errors.map((error) => ({ error, match: {} })));
  }

  /**
   * The next calls that are `match.op` and go to `match.to` throw these errors, one call each,
   * in order; other calls go through. Errors scripted by `failNext` and `failOn` are used in
   * the order they were scripted.
   */
  failOn(match: CallMatch, ...errors: (SluiceError | ActorError)[]): void {
    if (match.op === undefined && match.to === undefined) {
      throw new TypeError("failOn needs op or to (failNext fails any call)");
    }
    this.failures.push(...errors.map((error) => ({ error, match: { ...match } })));
  }

  /**
   * Calls to `actorId` reach `actor` in this process: an `ask` runs its turn at once and answers
   * with its reply or its error (`askReply` is not used); a `tell`, a `tellReliable` and each
   * routed target of a `dispatch` wait in `queued` until `runQueued()`. While its turn runs,
   * `host.selfId()` is `actorId`; so it is when the test hands `actor` to `handle`. An ask to an
   * actor that is in a turn already (a cycle) throws `DEADLINE_EXCEEDED`, as it would on a host
   * once its deadline passed. The call itself is still recorded and can be failed with `failOn`.
   */
  route(actorId: string, actor: Actor): void {
    this.routes.set(actorId, actor);
  }

  /**
   * Delivers the `queued` messages, oldest first, each in a turn of its routed actor with
   * principal `system`, including the messages those turns queue, until none is left. Returns
   * the ones whose turn failed (a told message's error reaches no caller).
   */
  runQueued(maxTurns = 100_000): TurnError[] {
    this.requireInstalled();
    const errors: TurnError[] = [];
    for (let n = 0; n < maxTurns; n++) {
      const q = this.queued.shift();
      if (q === undefined) return errors;
      const actor = this.routes.get(q.to);
      if (actor === undefined) throw new Error(`runQueued: ${q.to} is not routed`);
      try {
        this.turn(actor, new Envelope(q.sender, q.msgType, q.payload, "system", null));
      } catch (e) {
        if (!(e instanceof SluiceError)) throw e;
        errors.push({ to: q.to, msgType: q.msgType, payload: q.payload, error: e });
      }
    }
    throw new Error(`runQueued: still ${this.queued.length} queued after ${maxTurns} turns`);
  }

  /** Moves the fake clock (`host.nowMs()`) forward. */
  advance(ms: number): void {
    this.nowMs += ms;
  }

  /** Routes the SDK's host calls to this fake until `uninstall()`; returns the fake. */
  install(): this {
    if (this.installed) throw new Error("this FakeHost is already installed");
    this.previous = setImports(this.imports());
    this.installed = true;
    return this;
  }

  /** Puts back whatever was installed before. */
  uninstall(): void {
    if (!this.installed) return;
    setImports(this.previous);
    this.previous = null;
    this.installed = false;
  }

  /**
   * Delivers one message to `actor` and returns the reply bytes the caller would get (the
   * same conversion as in a component). A `SluiceError` propagates as thrown; anything else
   * becomes the `Internal` error the caller would see (`INTERNAL: <message>`, with `cause`).
   */
  handle(actor: Actor, msgType: string, payload: Payload = "", opts: DeliverOptions = {}): Uint8Array {
    this.requireInstalled();
    const env = new Envelope(
      opts.sender ?? null, msgType, toBytes(payload), opts.principal ?? "system", opts.deadlineMs ?? null,
    );
    return this.turn(actor, env);
  }

  /** `handle`, with the reply decoded as UTF-8. */
  text(actor: Actor, msgType: string, payload: Payload = "", opts: DeliverOptions = {}): string {
    return decodeUtf8(this.handle(actor, msgType, payload, opts));
  }

  private requireInstalled(): void {
    if (!this.installed) throw new Error("FakeHost is not installed: call install() first");
  }

  /** One turn of `actor` (as its routed id when it has one), its reply as the caller sees it. */
  private turn(actor: Actor, env: Envelope): Uint8Array {
    let routedAs: string | undefined;
    for (const [id, a] of this.routes) if (a === actor) routedAs ??= id;
    this.turns.push({ actor, routedAs, principal: env.principal });
    try {
      return toBytes(actor.handle(env));
    } catch (e) {
      if (e instanceof SluiceError) throw e;
      const err = uncoded(e);
      Object.defineProperty(err, "cause", { value: e, enumerable: false });
      throw err;
    } finally {
      this.turns.pop();
    }
  }

  /** The id of the actor whose turn is running (`selfId` outside a routed one). */
  private currentId(): string {
    return this.turns.at(-1)?.routedAs ?? this.selfId;
  }

  /** Throws `err` the way componentize-js throws a failed import: an Error whose own
   * `payload` is the `actor-error` record. */
  private fail(err: SluiceError | ActorError): never {
    const rec = err instanceof SluiceError ? toWit(err) : err;
    throw Object.assign(new Error(`${rec.message} (see error.payload)`), { payload: rec });
  }

  private record(call: Call): void {
    const by = this.turns.at(-1)?.routedAs;
    if (by !== undefined) call.by = by;
    this.calls.push(call);
    const i = this.failures.findIndex(({ match }) => matches(match, call));
    if (i < 0) return;
    const [{ error }] = this.failures.splice(i, 1);
    this.fail(error);
  }

  private enqueue(to: string, msgType: string, payload: Uint8Array, sender: string | null): void {
    if (this.routes.has(to)) this.queued.push({ to, msgType, payload, sender });
  }

  /** The index in `reminders` of `actorId`'s pending reminder `name`; -1 for none or `""`. */
  private pendingReminder(actorId: string, name: string): number {
    if (name === "") return -1;
    return this.reminders.findIndex((r) => r.actorId === actorId && r.name === name);
  }

  /** An ask to a routed actor: its turn, now. */
  private askRouted(to: string, target: Actor, msgType: string, payload: Uint8Array, timeoutMs: number): Uint8Array {
    if (this.turns.some((t) => t.actor === target)) {
      this.fail(new DeadlineExceeded(`DEADLINE_EXCEEDED: ${to} is in a turn already (an ask cycle)`));
    }
    const principal = this.turns.at(-1)?.principal ?? "system";
    try {
      return this.turn(target, new Envelope(this.currentId(), msgType, payload, principal, timeoutMs));
    } catch (e) {
      if (e instanceof SluiceError) this.fail(e);
      throw e;
    }
  }

  private imports(): WitImports {
    return {
      tell: (to, msgType, payload) => {
        this.record({ op: "tell", to, msgType, payload });
        this.enqueue(to, msgType, payload, this.currentId());
        return this.receipt;
      },
      ask: (to, msgType, payload, timeoutMs) => {
        this.record({ op: "ask", to, msgType, payload, timeoutMs: Number(timeoutMs) });
        const target = this.routes.get(to);
        if (target !== undefined) return this.askRouted(to, target, msgType, payload, Number(timeoutMs));
        const r = this.askReply;
        return toBytes(typeof r === "function" ? r(to, msgType, payload) : r);
      },
      schedule: (delayMs, msgType, payload) => {
        this.record({ op: "schedule", to: "", msgType, payload, delayMs: Number(delayMs) });
      },
      selfId: () => this.currentId(),
      nowMs: () => {
        const now = this.nowMs;
        this.nowMs += this.tickMs;
        return BigInt(now);
      },
      log: (level, msg) => {
        this.logs.push([level, msg]);
      },
      dispatch: (req): DispatchResult => {
        this.record({ op: "dispatch", to: "", msgType: req.msgType, payload: req.payload, request: req });
        for (const to of req.targets) this.enqueue(to, req.msgType, req.payload, req.dispatcherId);
        const answer = this.dispatchResult ?? req.targets.map((): DispatchOutcome => "delivered");
        const r = dispatchResultOf(typeof answer === "function" ? answer(req) : answer);
        return { ...r, outcomes: [...r.outcomes] };
      },
      tellReliable: (to, msgType, payload) => {
        this.record({ op: "tellReliable", to, msgType, payload });
        this.enqueue(to, msgType, payload, this.currentId());
        return this.deliveryPath;
      },
      remind: (name, delayMs, msgType, payload) => {
        const ms = Number(delayMs);
        this.record({ op: "remind", to: "", msgType, payload, delayMs: ms, name });
        const actorId = this.currentId();
        const i = this.pendingReminder(actorId, name);
        if (i >= 0) this.reminders.splice(i, 1);
        this.reminders.push({ actorId, name, delayMs: ms, dueMs: this.nowMs + ms, msgType, payload });
      },
      cancelReminder: (name) => {
        this.record({ op: "cancelReminder", to: "", msgType: "", payload: new Uint8Array(0), name });
        const i = this.pendingReminder(this.currentId(), name);
        if (i < 0) return false;
        this.reminders.splice(i, 1);
        return true;
      },
      publish: (topic, payload) => {
        this.record({ op: "publish", to: topic, msgType: "", payload });
      },
    };
  }
}

/** Whether `call` is one `failOn(match)` fails. */
function matches(match: CallMatch, call: Call): boolean {
  if (match.op !== undefined && call.op !== match.op) return false;
  if (match.to === undefined) return true;
  return call.request !== undefined ? call.request.targets.includes(match.to) : call.to === match.to;
}
