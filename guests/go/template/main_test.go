package main

import (
	"encoding/json"
	"errors"
	"testing"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/sluicetest"
)

// Runs natively with `go test ./...`: the fake host stands in for the real one.
func TestPingCountsAndUnknownTypesAreInvalidArgument(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	a := &myActor{}
	for n := 1; n <= 2; n++ {
		out, err := a.Handle(&sluice.Envelope{MsgType: "ping"})
		if err != nil {
			t.Fatal(err)
		}
		var reply map[string]any
		if err := json.Unmarshal(out, &reply); err != nil {
			t.Fatal(err)
		}
		if reply["pong"] != float64(n) || reply["at"] != float64(fake.Now) {
			t.Fatalf("ping %d: %v", n, reply)
		}
	}
	_, err := a.Handle(&sluice.Envelope{MsgType: "nope"})
	if !errors.Is(err, sluice.ErrInvalidArgument) || err.Error() != `INVALID_ARGUMENT: unknown msg-type "nope"` {
		t.Fatalf("unknown msg-type: %v", err)
	}
}
