package sluicetest_test

import (
	"context"
	"errors"
	"testing"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
	"sluice.dev/guest/sluicetest"
)

// asker asks Worker/1 with the turn's context and replies what it got.
var asker = sluice.HandlerFunc(func(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	if env.MsgType == "plain" {
		return nil, errors.New("plain failure")
	}
	return host.Ask(ctx, "Worker/1", "process", env.Payload)
})

func TestHandleRunsTheTurnWithTheEnvelopesDeadline(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	out, err := fake.Handle(asker, &sluice.Envelope{MsgType: "go", Payload: []byte("job"), DeadlineMs: 300, HasDeadline: true})
	if err != nil || string(out) != "{}" {
		t.Fatalf("%q %v", out, err)
	}
	if c := fake.Calls[0]; c.Op != "ask" || c.To != "Worker/1" || string(c.Payload) != "job" || c.TimeoutMs == 0 || c.TimeoutMs > 300 {
		t.Fatalf("the ask inherits the turn's 300 ms: %+v", c)
	}
	fake.Handle(asker, &sluice.Envelope{MsgType: "go"})
	if got := fake.Calls[1].TimeoutMs; got != sluice.DefaultAskTimeoutMs {
		t.Fatalf("no deadline: %d", got)
	}
	_, err = fake.Handle(asker, &sluice.Envelope{MsgType: "plain"})
	var e *sluice.Error
	if !errors.As(err, &e) || e.Code != sluice.CodeInternal || e.Message != "INTERNAL: plain failure" {
		t.Fatalf("a plain error comes back as the caller sees it: %#v", err)
	}
}

func TestDefaultsMatchTheOtherSDKsFakes(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	ctx := context.Background()
	if host.SelfID() != "MyActor/1" || host.NowMs() != 1000 {
		t.Fatalf("self %q, now %d", host.SelfID(), host.NowMs())
	}
	if r, _ := host.Tell(ctx, "W/1", "t", nil); r != sluice.Queued {
		t.Fatalf("tell: %v", r)
	}
	if p, _ := host.Outbox().TellReliable(ctx, "W/1", "t", nil); p != sluice.Direct {
		t.Fatalf("tell reliable: %v", p)
	}
	res, err := host.Outbox().Dispatch(ctx, sluice.DispatchRequest{Targets: []string{"W/1", "W/2", "W/3"}})
	if err != nil || *res != (sluice.DispatchResult{Accepted: 3}) {
		t.Fatalf("dispatch accepts every target: %+v %v", res, err)
	}
	fake.FailWith = sluice.NotFound("NOT_FOUND: no actor W/9")
	if _, err := host.Tell(ctx, "W/9", "t", nil); !errors.Is(err, sluice.ErrNotFound) || len(fake.Calls) != 4 {
		t.Fatalf("a scripted failure is recorded and returned: %v %d", err, len(fake.Calls))
	}
	if _, err := host.Tell(ctx, "W/9", "t", nil); err != nil {
		t.Fatalf("FailWith fails one call: %v", err)
	}
}
