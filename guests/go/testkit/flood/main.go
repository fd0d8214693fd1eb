// TESTKIT `flood`: tells `count` messages to `to` as fast as it can and counts the outcomes.
package main

import (
	"context"
	"errors"
	"strconv"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
)

func handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	if env.MsgType != "flood" {
		return env.Payload, nil
	}
	var req struct {
		To      string `json:"to"`
		MsgType string `json:"msg_type"`
		Count   int    `json:"count"`
	}
	if err := env.JSON(&req); err != nil {
		return nil, sluice.InvalidArgument("bad request: " + err.Error())
	}
	counts := map[string]any{"queued": 0, "displaced": 0, "dropped": 0, "refused": 0}
	var queued, displaced, dropped, refused int
	var firstError, firstErrorType any
	for i := 0; i < req.Count; i++ {
		r, err := host.Tell(ctx, req.To, req.MsgType, strconv.Itoa(i))
		var e *sluice.Error
		switch {
		case errors.As(err, &e):
			refused++
			if firstError == nil {
				firstError, firstErrorType = e.Message, e.Type()
			}
		case err != nil:
			return nil, err
		case r == sluice.Queued:
			queued++
		case r == sluice.DisplacedOldest:
			displaced++
		default:
			dropped++
		}
	}
	counts["queued"], counts["displaced"], counts["dropped"], counts["refused"] = queued, displaced, dropped, refused
	counts["first_error"], counts["first_error_type"] = firstError, firstErrorType
	return sluice.Reply(counts)
}

func init() { sluice.Register(sluice.HandlerFunc(handle)) }

func main() {}
