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
 * schedule, dispatch, tellReliable, publish) throws that error, which reaches the actor as the
 * same typed `SluiceError` the real host's `actor-error` becomes.
 */
import type {
  ActorError, DeliveryPath, DispatchRequest, DispatchResult, LogLevel, TellReceipt,
} from "sluice:actor/types@0.1.0";
import { type Actor, Envelope, uncoded } from "../actor.ts";
import { SluiceError, toWit } from "../errors.ts";
import { type Payload, toBytes } from "../host.ts";
import { decodeUtf8 } from "../utf8.ts";
import { type WitImports, setImports } from "./imports.ts";

/** Which host import a recorded call went through. */
export type Op = "tell" | "ask" | "schedule" | "dispatch" | "tellReliable" | "publish";

/** One host call the actor made, as the host received it (payloads as bytes). */
export interface Call {
  op: Op;
  /** The target actor id; the topic for `publish`; `""` for `schedule` and `dispatch`. */
  to: string;
  msgType: string;
  payload: Uint8Array;
  /** `ask`: the deadline sent, in ms (after the SDK applied `with` and defaults). */
  timeoutMs?: number;
  /** `schedule`: the delay, in ms. */
  delayMs?: number;
  /** `dispatch`: the WIT request exactly as sent. */
  request?: DispatchRequest;
}

/** What a fake `ask` answers: a payload, or a function of the call. */
export type AskReply = Payload | ((to: string, msgType: string, payload: Uint8Array) => Payload);

/** The fake's answers; every one can also be changed on the fake between calls. */
export interface FakeHostOptions {
  /** `host.selfId()`; default `"MyActor/1"`. */
  selfId?: string;
  /** `host.nowMs()`; default 1000. */
  nowMs?: number;
  /** What `ask` answers; default `"{}"`. */
  askReply?: AskReply;
  /** What `tell` returns; default `"queued"`. */
  receipt?: TellReceipt;
  /** Where `tellReliable` went; default `"direct"`. */
  deliveryPath?: DeliveryPath;
  /** `[accepted, rejected]` for `dispatch`; default: every target accepted. */
  dispatchResult?: [number, number] | null;
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
  askReply: AskReply;
  receipt: TellReceipt;
  deliveryPath: DeliveryPath;
  dispatchResult: [number, number] | null;
  /** Fallible calls in order (`log`, `selfId` and `nowMs` are not recorded here). */
  calls: Call[] = [];
  /** `[level, message]` per `host.log`. */
  logs: [LogLevel, string][] = [];
  private failures: (SluiceError | ActorError)[] = [];
  private previous: WitImports | null = null;
  private installed = false;

  constructor(opts: FakeHostOptions = {}) {
    this.selfId = opts.selfId ?? "MyActor/1";
    this.nowMs = opts.nowMs ?? 1000;
    this.askReply = opts.askReply ?? "{}";
    this.receipt = opts.receipt ?? "queued";
    this.deliveryPath = opts.deliveryPath ?? "direct";
    this.dispatchResult = opts.dispatchResult ?? null;
  }

  /** The next fallible calls throw these errors, one call each, in order. */
  failNext(...errors: (SluiceError | ActorError)[]): void {
    this.failures.push(...errors);
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
    if (!this.installed) throw new Error("FakeHost is not installed: call install() first");
    const env = new Envelope(
      opts.sender ?? null, msgType, toBytes(payload), opts.principal ?? "system", opts.deadlineMs ?? null,
    );
    try {
      return toBytes(actor.handle(env));
    } catch (e) {
      if (e instanceof SluiceError) throw e;
      const err = uncoded(e);
      Object.defineProperty(err, "cause", { value: e, enumerable: false });
      throw err;
    }
  }

  /** `handle`, with the reply decoded as UTF-8. */
  text(actor: Actor, msgType: string, payload: Payload = "", opts: DeliverOptions = {}): string {
    return decodeUtf8(this.handle(actor, msgType, payload, opts));
  }

  private record(call: Call): void {
    this.calls.push(call);
    const err = this.failures.shift();
    if (err === undefined) return;
    // Thrown the way componentize-js throws a failed import: an Error whose own `payload` is
    // the `actor-error` record.
    const rec = err instanceof SluiceError ? toWit(err) : err;
    throw Object.assign(new Error(`${rec.message} (see error.payload)`), { payload: rec });
  }

  private imports(): WitImports {
    return {
      tell: (to, msgType, payload) => {
        this.record({ op: "tell", to, msgType, payload });
        return this.receipt;
      },
      ask: (to, msgType, payload, timeoutMs) => {
        this.record({ op: "ask", to, msgType, payload, timeoutMs: Number(timeoutMs) });
        const r = this.askReply;
        return toBytes(typeof r === "function" ? r(to, msgType, payload) : r);
      },
      schedule: (delayMs, msgType, payload) => {
        this.record({ op: "schedule", to: "", msgType, payload, delayMs: Number(delayMs) });
      },
      selfId: () => this.selfId,
      nowMs: () => BigInt(this.nowMs),
      log: (level, msg) => {
        this.logs.push([level, msg]);
      },
      dispatch: (req): DispatchResult => {
        this.record({ op: "dispatch", to: "", msgType: req.msgType, payload: req.payload, request: req });
        const [accepted, rejected] = this.dispatchResult ?? [req.targets.length, 0];
        return { accepted, rejected };
      },
      tellReliable: (to, msgType, payload) => {
        this.record({ op: "tellReliable", to, msgType, payload });
        return this.deliveryPath;
      },
      publish: (topic, payload) => {
        this.record({ op: "publish", to: topic, msgType: "", payload });
      },
    };
  }
}
