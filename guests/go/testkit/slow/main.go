// TESTKIT `slow`: sleeps `payload` ms (default 100) with time.Sleep, then replies the payload.
package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	sluice "sluice.dev/guest"
)

func handle(_ context.Context, env *sluice.Envelope) ([]byte, error) {
	if env.MsgType == "ok" {
		return []byte("alive"), nil
	}
	ms, err := strconv.Atoi(strings.TrimSpace(env.Text()))
	if err != nil {
		ms = 100
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return env.Payload, nil
}

func init() { sluice.Register(sluice.HandlerFunc(handle)) }

func main() {}
