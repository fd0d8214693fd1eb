// The other roles: Worker, ConfigServer, TelemetryCollector, Device. Each records what it
// processes once per id: the outbox is at-least-once, the actors make it exactly-once.
import { type Envelope, InvalidArgument, ResourceExhausted, host } from "@sluice/guest";
import { KEY, type Role, SeenList, busy, countsOf, ctx, jsonBytes, payloadOf, unknownMessage } from "./common.ts";

interface WorkerMessage {
  type: string;
  seq: number;
  task: string;
  task_id: string;
  version: string;
  body: unknown;
}

/** Executes tasks, holds a config version, takes heartbeats. */
export class Worker implements Role {
  /** task id → times processed after dedupe (so always 1). */
  private readonly tasks: Record<string, number> = {};
  private configVersion: string | null = null;
  private readonly heartbeats = new SeenList<number>();
  /** After `fix`, a malformed task body is accepted. */
  private fixed = false;

  handle(env: Envelope): unknown {
    switch (env.msgType) {
      case "dispatch": case "process": case "heartbeat":
        return this.process(payloadOf<WorkerMessage>(env));
      case "send_heartbeats":
        return this.sendHeartbeats(payloadOf(env));
      case "fix":
        this.fixed = true;
        return { fixed: true };
      case "state":
        return { tasks: this.tasks, config_version: this.configVersion, heartbeats: this.heartbeats.items };
      default:
        throw unknownMessage("Worker", env);
    }
  }

  private process(msg: Partial<WorkerMessage>): unknown {
    if (msg.type === "heartbeat") {
      this.heartbeats.record(Number(msg.seq));
      return { seq: msg.seq };
    }
    if (msg.task === "config") {
      this.configVersion = String(msg.version);
      return { config_version: this.configVersion };
    }
    if (msg.task !== undefined) {
      if (typeof msg.body === "string" && !this.fixed && !parses(msg.body)) {
        throw new InvalidArgument("INVALID_ARGUMENT: malformed task");
      }
      const id = String(msg.task_id ?? msg.task);
      this.tasks[id] ??= 1; // a redelivery of a recorded task is not processed again
      return { task_id: id };
    }
    throw new InvalidArgument("INVALID_ARGUMENT: Worker got neither a task nor a heartbeat");
  }

  /** The heartbeat burst: `count` heartbeats to `to`, one key, `overwrite`, as fast as it can. */
  private sendHeartbeats({ count = 50, to = "JobQueueLeader/main" }: { count?: number; to?: string }) {
    const results = [];
    for (let seq = 1; seq <= count; seq++) {
      const payloadBytes = jsonBytes({ type: "heartbeat", seq, cpu: 0.42 });
      results.push(host.outbox.dispatch(ctx, host.selfId(), [to], payloadBytes, "cast", KEY, "overwrite"));
    }
    return { sent: count, ...countsOf(...results) };
  }
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Serves firmware downloads, one at a time, `work_ms` each. */
export class ConfigServer implements Role {
  private readonly served = new SeenList<string>();

  constructor(private readonly workMs: number) {}

  handle(env: Envelope): unknown {
    switch (env.msgType) {
      case "dispatch": case "process": {
        const { download, worker } = payloadOf<{ download: string; worker: string }>(env);
        if (worker === undefined) throw new InvalidArgument("INVALID_ARGUMENT: download without a worker");
        busy(this.workMs);
        this.served.record(String(worker));
        return { download, worker };
      }
      case "state":
        return { served: this.served.items };
      default:
        throw unknownMessage("ConfigServer", env);
    }
  }
}

/** Records telemetry samples once per seq and counts bursts, `work_ms` per message. */
export class TelemetryCollector implements Role {
  private readonly telemetry = new SeenList<number>();
  private bursts = 0;

  constructor(private readonly workMs: number) {}

  handle(env: Envelope): unknown {
    if (env.msgType === "state") return { telemetry: this.telemetry.items, bursts: this.bursts };
    if (env.msgType !== "process" && env.msgType !== "dispatch") throw unknownMessage("TelemetryCollector", env);
    const msg = payloadOf<{ type: string; seq: number }>(env);
    busy(this.workMs);
    switch (msg.type) {
      case "telemetry":
        this.telemetry.record(Number(msg.seq));
        return { seq: msg.seq };
      case "burst":
        this.bursts++;
        return { bursts: this.bursts };
      default:
        throw new InvalidArgument(`INVALID_ARGUMENT: TelemetryCollector does not take ${JSON.stringify(msg.type)}`);
    }
  }
}

/** The offline-delivery target: records firmware in arrival order, fails while offline. */
export class Device implements Role {
  private readonly firmware = new SeenList<number>();

  constructor(private readonly online: boolean) {}

  handle(env: Envelope): unknown {
    switch (env.msgType) {
      case "dispatch": case "process": {
        const { firmware } = payloadOf<{ firmware: number }>(env);
        if (typeof firmware !== "number") throw new InvalidArgument("INVALID_ARGUMENT: no firmware number");
        // "Come back in a second": the relay backs off at least retry_after_ms between
        // attempts; the message's delivery count grows.
        if (!this.online) {
          throw new ResourceExhausted("RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)", { retryAfterMs: 1000 });
        }
        this.firmware.record(firmware);
        return { firmware };
      }
      case "state":
        return { firmware: this.firmware.items };
      default:
        throw unknownMessage("Device", env);
    }
  }
}
