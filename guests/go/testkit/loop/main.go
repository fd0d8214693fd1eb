// TESTKIT `loop`: `ok` replies alive; anything else spins forever without calling the host.
package main

import (
	"context"

	sluice "sluice.dev/guest"
)

var sink uint64

func handle(_ context.Context, env *sluice.Envelope) ([]byte, error) {
	if env.MsgType == "ok" {
		return []byte("alive"), nil
	}
	for {
		sink++
	}
}

func init() { sluice.Register(sluice.HandlerFunc(handle)) }

func main() {}
