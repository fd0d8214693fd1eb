// A Sluice actor in TypeScript. Build: sluice build . (or see guests/typescript/README.md).
import { type Envelope, InvalidArgument, ResourceExhausted, host, register } from "@sluice/guest";

export class MyActor {
  count = 0;

  init(config: string): void {
    // `config` is the actor's `init` table from app-config.toml, as JSON.
  }

  handle(env: Envelope): unknown {
    this.count++;
    switch (env.msgType) {
      case "ping":
        return { pong: this.count, at: host.nowMs(), me: host.selfId() };
      case "forward":
        try {
          return host.ask("Worker/1", "process", env.json(), 2000);
        } catch (e) {
          if (e instanceof ResourceExhausted) return { busy: true, retry_after_ms: e.retryAfterMs };
          throw e;
        }
      default:
        // Errors read `CODE: detail` (wit/errors.json); any other thrown value is INTERNAL.
        throw new InvalidArgument(`INVALID_ARGUMENT: unknown msg-type ${env.msgType}`);
    }
  }
}

export const actor = register(new MyActor());
