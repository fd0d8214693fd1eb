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

// The fake records every host call (fake.Calls) and fails the next one with fake.FailWith.
func TestForwardAsksTheWorkerAndReportsAFullMailbox(t *testing.T) {
	fake := sluicetest.New()
	fake.AskReply = []byte(`{"done":true}`)
	sluice.SetBackend(fake)
	a := &myActor{}
	out, err := a.Handle(&sluice.Envelope{MsgType: "forward", Payload: []byte(`{"job":1}`)})
	if err != nil || string(out) != `{"done":true}` {
		t.Fatalf("forward: %q, %v", out, err)
	}
	if len(fake.Calls) != 1 || fake.Calls[0].Op != "ask" || fake.Calls[0].To != "Worker/1" ||
		fake.Calls[0].MsgType != "process" || string(fake.Calls[0].Payload) != `{"job":1}` || fake.Calls[0].Timeout != 2000 {
		t.Fatalf("host calls: %+v", fake.Calls)
	}
	retry := uint64(7)
	fake.FailWith = &sluice.Error{Code: sluice.CodeResourceExhausted, Message: "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=7)", RetryAfterMs: &retry}
	out, err = a.Handle(&sluice.Envelope{MsgType: "forward", Payload: []byte(`{}`)})
	if err != nil || string(out) != `{"busy":true,"retry_after_ms":7}` {
		t.Fatalf("forward to a full mailbox: %q, %v", out, err)
	}
}
