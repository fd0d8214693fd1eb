// JobQueueLeader: runs the scenarios of PROTOCOL.md. The driver asks `JobQueueLeader/main`
// one message per scenario; every reply is the JSON the protocol shows.
import {
  type Envelope, InvalidArgument, ResourceExhausted, SluiceError, host,
} from "@sluice/guest";
import {
  DISPATCHER_ID, type DispatchCounts, KEY, type Role, SeenList, countsOf, ctx, jsonBytes, payloadOf, unknownMessage,
  workerIds,
} from "./common.ts";

const COLLECTOR = "TelemetryCollector/main";
const BURST_WORKER = "Worker/worker-101";
const POISON_WORKER = "Worker/poison";
const CONFIG_SERVERS = 2;
/** A burst of tells before every 10th telemetry sample … */
const BURST_EVERY = 10;
/** … of 6 tells: more than the collector's 4 mailbox slots. */
const BURST_SIZE = 6;
const TELEMETRY_ASK_MS = 2000;
const HEARTBEAT_BURST_ASK_MS = 20_000;

export interface WaveResult extends DispatchCounts {
  wave: number;
  targets: number;
  wall_ms: number;
}

export class JobQueueLeader implements Role {
  /** The seq of the last `send_heartbeat` (the first call sends 1). */
  private heartbeatSeq = 0;
  /** Heartbeats the leader itself received, once per seq, in arrival order. */
  private readonly heartbeats = new SeenList<number>();

  handle(env: Envelope): unknown {
    switch (env.msgType) {
      case "thundering_herd": return this.thunderingHerd(payloadOf(env));
      case "config_wave_deploy": return this.configWaveDeploy(payloadOf(env));
      case "send_heartbeat": return this.sendHeartbeat(payloadOf(env));
      case "heartbeat_burst": return this.heartbeatBurst(payloadOf(env));
      case "telemetry_test": return this.telemetryTest(payloadOf(env));
      case "firmware_rollout": return this.firmwareRollout(payloadOf(env));
      case "poison": return this.poison();
      case "heartbeats": case "state": return { seqs: this.heartbeats.items };
    }
    // The outbox delivers with msg-type `dispatch`: any message whose JSON says
    // "type":"heartbeat" is a heartbeat.
    const msg = payloadOf<{ type: string; seq: number }>(env);
    if (msg.type === "heartbeat" && typeof msg.seq === "number") {
      this.heartbeats.record(msg.seq);
      return { seq: msg.seq };
    }
    throw unknownMessage("JobQueueLeader", env);
  }

  /** One task to every worker at once, then the very same dispatch again (a redelivery). */
  thunderingHerd({ workers = 100, task_id = "herd-1" }: { workers?: number; task_id?: string }) {
    const targets = workerIds(workers);
    const payloadBytes = jsonBytes({ task: "thundering_herd", priority: "high", task_id });
    const t0 = host.nowMs();
    const first = host.outbox.dispatch(ctx, DISPATCHER_ID, targets, payloadBytes, "cast", task_id, "append");
    const wallMs = host.nowMs() - t0;
    // The idempotency key must absorb this one: every worker still processes the task once.
    const again = host.outbox.dispatch(ctx, DISPATCHER_ID, targets, payloadBytes, "cast", task_id, "append");
    return { targets: targets.length, ...countsOf(first), wall_ms: wallMs, redelivery: countsOf(again) };
  }

  /**
   * A config version in waves; every worker of a wave also downloads it from a config
   * server, whose two-slot mailbox fills: the relay meets `MailboxFull` and backs off.
   */
  configWaveDeploy({ workers = 100, wave_size = 20, version = "2.1.0" }: { workers?: number; wave_size?: number; version?: string }) {
    if (!(wave_size > 0)) throw new InvalidArgument("INVALID_ARGUMENT: wave_size must be positive");
    const configBytes = jsonBytes({ task: "config", version });
    const waves: WaveResult[] = [];
    const results = [];
    let configServerQueued = 0;
    for (let start = 0, wave = 0; start < workers; start += wave_size, wave++) {
      const end = Math.min(start + wave_size, workers);
      const targets = workerIds(end, start);
      const t0 = host.nowMs();
      const result = host.outbox.dispatch(ctx, DISPATCHER_ID, targets, configBytes, "cast", `config-${version}`, "append");
      waves.push({ wave, targets: targets.length, ...countsOf(result), wall_ms: host.nowMs() - t0 });
      results.push(result);
      // Every worker of the wave downloads the version from the wave's config server
      // (`cs-(wave mod 2)`): one download per dispatch, faster than the server's 2 ms each.
      const server = `ConfigServer/cs-${wave % CONFIG_SERVERS}`;
      for (const w of targets) {
        const download = host.outbox.dispatch(
          ctx, DISPATCHER_ID, [server], jsonBytes({ download: version, worker: w }), "cast", `dl-${version}-${w}`, "append");
        configServerQueued += download.queued;
      }
    }
    return { waves, total: countsOf(...results), config_server_queued: configServerQueued };
  }

  /** The seed's heartbeat: one key, `overwrite`, so a late worker only gets the newest. */
  sendHeartbeat({ workers = 100 }: { workers?: number }) {
    const seq = ++this.heartbeatSeq;
    const payloadBytes = jsonBytes({ type: "heartbeat", seq, cpu: 0.42 });
    const result = host.outbox.dispatch(ctx, DISPATCHER_ID, workerIds(workers), payloadBytes, "cast", KEY, "overwrite");
    return { seq, ...countsOf(result) };
  }

  /**
   * Worker/worker-101 sends this leader a burst of heartbeats while the leader is busy in this
   * very turn: its 8-slot mailbox fills and the outbox keeps only the newest pending one.
   */
  heartbeatBurst({ count = 50 }: { count?: number }) {
    return host.ask(BURST_WORKER, "send_heartbeats", { count, to: host.selfId() }, HEARTBEAT_BURST_ASK_MS);
  }

  /** Direct `ask` first; on any error, the outbox. Bursts keep the collector full half the time. */
  telemetryTest({ count = 200 }: { count?: number }) {
    let fastPathSuccess = 0, outboxFallback = 0, burstRefused = 0;
    for (let i = 0; i < count; i++) {
      if (i % BURST_EVERY === 0) {
        for (let n = 0; n < BURST_SIZE; n++) {
          try {
            host.tell(COLLECTOR, "process", { type: "burst", seq: i, n });
          } catch (e) {
            if (!(e instanceof ResourceExhausted)) throw e;
            burstRefused++;
          }
        }
      }
      try {
        host.ask(COLLECTOR, "process", { type: "telemetry", seq: i }, TELEMETRY_ASK_MS);
        fastPathSuccess++;
      } catch (e) {
        if (!(e instanceof SluiceError)) throw e;
        const payloadBytes = jsonBytes({ type: "telemetry", seq: i, cpu: 0.5, mem: 0.8 });
        host.outbox.dispatch(ctx, DISPATCHER_ID, [COLLECTOR], payloadBytes, "cast", `tel-${i}`, "append");
        outboxFallback++;
      }
    }
    return { count, fast_path_success: fastPathSuccess, outbox_fallback: outboxFallback, burst_refused: burstRefused };
  }

  /** Every firmware to every device in `call` mode: a failing device keeps the rest queued. */
  firmwareRollout({ devices = 10, count = 20 }: { devices?: number; count?: number }) {
    const targets = Array.from({ length: devices }, (_, i) => `Device/dev-${i}`);
    const results = Array.from({ length: count }, (_, k) =>
      host.outbox.dispatch(ctx, DISPATCHER_ID, targets, jsonBytes({ firmware: k }), "call", `fw-${k}`, "append"));
    return { targets: devices, messages: devices * count, ...countsOf(...results) };
  }

  /** A task the worker cannot parse, in `call` mode: it ends in the DLQ after max_attempts. */
  poison(): DispatchCounts {
    const payloadBytes = jsonBytes({ task: "poison", body: "{malformed" });
    return countsOf(host.outbox.dispatch(ctx, DISPATCHER_ID, [POISON_WORKER], payloadBytes, "call", "poison-1", "append"));
  }
}
