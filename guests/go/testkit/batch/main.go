// TESTKIT `batch`: what the tests of batched turns queue behind a held turn. `seq` numbers the
// turns this instance ran, so order and once-only delivery show in the replies; `spin`, `trap`
// and `forever` fail one turn of a batch in each way. `hold` and `spin` both poll the clock.
package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	sluice "sluice.dev/guest"
)

var (
	seen []string
	sink uint64
)

func busy(env *sluice.Envelope) []byte {
	ms, _ := strconv.Atoi(strings.TrimSpace(env.Text()))
	until := time.Now().Add(time.Duration(ms) * time.Millisecond)
	for time.Now().Before(until) {
	}
	return env.Payload
}

func handle(_ context.Context, env *sluice.Envelope) ([]byte, error) {
	switch env.MsgType {
	case "hold", "spin":
		return busy(env), nil
	case "seq":
		seen = append(seen, env.Text())
		return []byte(fmt.Sprintf("%d:%s", len(seen), env.Text())), nil
	case "seen":
		return []byte(strings.Join(seen, ",")), nil
	case "trap":
		panic("trap requested")
	case "forever":
		for {
			sink++
		}
	}
	return nil, sluice.Errorf(sluice.CodeInvalidArgument, "unknown op %s", env.MsgType)
}

func init() { sluice.Register(sluice.HandlerFunc(handle)) }

func main() {}
