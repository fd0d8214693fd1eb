// The job queue of seed 000 §4 as one Sluice component. Every actor type of app-config.toml
// runs this module; its role comes from the `init` config
// (`{"role": "leader" | "worker" | "config_server" | "collector" | "device"}`).
// See ../PROTOCOL.md for every message and the invariants the driver checks.
import { type Envelope, InvalidArgument, register } from "@sluice/guest";
import { type Role } from "./common.ts";
import { JobQueueLeader } from "./leader.ts";
import { ConfigServer, Device, TelemetryCollector, Worker } from "./roles.ts";

/** The actor's `init` table from app-config.toml. */
export interface Config {
  role?: string;
  work_ms?: number;
  online?: boolean;
}

export function roleFor(config: Config): Role {
  switch (config.role) {
    case "leader": return new JobQueueLeader();
    case "worker": return new Worker();
    case "config_server": return new ConfigServer(config.work_ms ?? 0);
    case "collector": return new TelemetryCollector(config.work_ms ?? 0);
    case "device": return new Device(config.online ?? true);
    default: throw new InvalidArgument(`INVALID_ARGUMENT: unknown role ${JSON.stringify(config.role)}`);
  }
}

/** The registered actor: picks its role in `init`, then hands every message to it. */
export class JobQueue {
  private role: Role | null = null;

  init(config: string): void {
    let parsed: Config;
    try {
      parsed = JSON.parse(config || "{}") as Config;
    } catch {
      throw new InvalidArgument("INVALID_ARGUMENT: init config is not JSON");
    }
    this.role = roleFor(parsed);
  }

  handle(env: Envelope): unknown {
    if (!this.role) throw new InvalidArgument("INVALID_ARGUMENT: no role (init never ran)");
    return this.role.handle(env);
  }
}

export const actor = register(new JobQueue());
