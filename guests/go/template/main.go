// A Sluice actor in Go. Build: sluice build . (or see guests/go/README.md).
package main

import (
	"context"
	"errors"
	"time"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
)

type myActor struct{ count int }

// Init receives the actor's `init` table from app-config.toml, as JSON.
func (a *myActor) Init(config string) error { return nil }

// Handle runs one turn. ctx carries the turn's deadline: pass it to every host call.
func (a *myActor) Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	a.count++
	switch env.MsgType {
	case "ping":
		return sluice.Reply(map[string]any{"pong": a.count, "at": host.NowMs(), "me": host.SelfID()})
	case "forward":
		// At most 2 s for this call (less if the turn's own deadline comes first).
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		reply, err := host.Ask(ctx, "Worker/1", "process", env.Payload)
		var e *sluice.Error
		if errors.Is(err, sluice.ErrResourceExhausted) && errors.As(err, &e) {
			return sluice.Reply(map[string]any{"busy": true, "retry_after_ms": e.RetryAfterMs})
		}
		return reply, err
	}
	// Errors read "CODE: detail" (wit/errors.json); a plain error is INTERNAL.
	return nil, sluice.Errorf(sluice.CodeInvalidArgument, "unknown msg-type %q", env.MsgType)
}

// Components built with -buildmode=c-shared run init functions, never main.
func init() { sluice.Register(&myActor{}) }

func main() {}
