package main

import (
	"errors"
	"testing"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/sluicetest"
)

// Runs natively with `go test ./...`: the fake host stands in for the real one (self id
// "MyActor/1", clock at 1000 ms; every host call recorded in fake.Calls).
func TestPingCountsAndUnknownTypesAreInvalidArgument(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	a := &myActor{}
	for _, want := range []string{`{"at":1000,"me":"MyActor/1","pong":1}`, `{"at":1000,"me":"MyActor/1","pong":2}`} {
		out, err := fake.Handle(a, &sluice.Envelope{MsgType: "ping"})
		if err != nil || string(out) != want {
			t.Fatalf("ping: %s, %v; want %s", out, err, want)
		}
	}
	_, err := fake.Handle(a, &sluice.Envelope{MsgType: "nope"})
	if !errors.Is(err, sluice.ErrInvalidArgument) || err.Error() != `INVALID_ARGUMENT: unknown msg-type "nope"` {
		t.Fatalf("unknown msg-type: %v", err)
	}
}

// fake.Handle runs a turn as the host does (the envelope's deadline in the handler's ctx);
// fake.FailNext fails the next host calls, one error each.
func TestForwardAsksTheWorkerAndReportsAFullMailbox(t *testing.T) {
	fake := sluicetest.New()
	fake.AskReply = []byte(`{"done":true}`)
	sluice.SetBackend(fake)
	a := &myActor{}
	out, err := fake.Handle(a, &sluice.Envelope{MsgType: "forward", Payload: []byte(`{"job":1}`)})
	if err != nil || string(out) != `{"done":true}` {
		t.Fatalf("forward: %q, %v", out, err)
	}
	ask := fake.Calls[0]
	// The ask gets what is left of its 2 s, in whole ms.
	if len(fake.Calls) != 1 || ask.Op != "ask" || ask.To != "Worker/1" || ask.MsgType != "process" ||
		string(ask.Payload) != `{"job":1}` || ask.TimeoutMs == 0 || ask.TimeoutMs > 2000 {
		t.Fatalf("host calls: %+v", fake.Calls)
	}
	// Under a turn deadline of 300 ms, the earlier one counts.
	fake.Handle(a, &sluice.Envelope{MsgType: "forward", DeadlineMs: 300, HasDeadline: true})
	if got := fake.Calls[1].TimeoutMs; got == 0 || got > 300 {
		t.Fatalf("ask under a 300 ms turn: %d ms", got)
	}
	retry := uint64(7)
	fake.FailNext(&sluice.Error{Code: sluice.CodeResourceExhausted, Message: "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=7)", RetryAfterMs: &retry})
	out, err = fake.Handle(a, &sluice.Envelope{MsgType: "forward", Payload: []byte(`{}`)})
	if err != nil || string(out) != `{"busy":true,"retry_after_ms":7}` {
		t.Fatalf("forward to a full mailbox: %q, %v", out, err)
	}
}
