// TESTKIT `hog`: `ok` replies alive; anything else allocates and touches 1 MiB chunks forever.
package main

import (
	"context"

	sluice "sluice.dev/guest"
)

const mib = 1 << 20

var chunks [][]byte

func handle(_ context.Context, env *sluice.Envelope) ([]byte, error) {
	if env.MsgType == "ok" {
		return []byte("alive"), nil
	}
	for {
		c := make([]byte, mib)
		for i := 0; i < mib; i += 4096 { // touch every page
			c[i] = 1
		}
		chunks = append(chunks, c)
	}
}

func init() { sluice.Register(sluice.HandlerFunc(handle)) }

func main() {}
