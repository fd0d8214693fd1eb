// TESTKIT `crash`: `ok` replies alive; anything else panics (a trap).
package main

import (
	"context"

	sluice "sluice.dev/guest"
)

func handle(_ context.Context, env *sluice.Envelope) ([]byte, error) {
	if env.MsgType == "ok" {
		return []byte("alive"), nil
	}
	panic("crash requested by " + env.MsgType)
}

func init() { sluice.Register(sluice.HandlerFunc(handle)) }

func main() {}
