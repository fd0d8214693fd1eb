package host_test

import (
	"errors"
	"testing"
	"time"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
	"sluice.dev/guest/sluicetest"
)

func u64(v uint64) *uint64 { return &v }

func TestFullMailboxIsResourceExhaustedWithExactMessage(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	msg := "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)"
	f.FailWith = &sluice.Error{Code: sluice.CodeResourceExhausted, Message: msg, RetryAfterMs: u64(12)}
	_, err := host.Tell("Worker/1", "job", "x")
	if !errors.Is(err, sluice.ErrResourceExhausted) {
		t.Fatalf("errors.Is ResourceExhausted: got %v", err)
	}
	if errors.Is(err, sluice.ErrNotFound) {
		t.Fatal("must not match another code")
	}
	var e *sluice.Error
	if !errors.As(err, &e) || e.Error() != msg || *e.RetryAfterMs != 12 || e.Type() != "ResourceExhausted" {
		t.Fatalf("details lost: %#v", e)
	}
}

func TestAskSeedShapeAndDeadline(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	reply, err := host.Ask("Worker/1", "process", map[string]int{"n": 1}, 2000)
	if err != nil || string(reply) != "pong" {
		t.Fatalf("ask: %q %v", reply, err)
	}
	if c := f.Calls[0]; string(c.Payload) != `{"n":1}` || c.Timeout != 2000 {
		t.Fatalf("ask call: %+v", c)
	}
	f.FailWith = &sluice.Error{Code: sluice.CodeDeadlineExceeded, Message: "d", Skipped: true}
	_, err = host.Ask("Slow/1", "x", nil, 0)
	var e *sluice.Error
	if !errors.Is(err, sluice.ErrDeadlineExceeded) || !errors.As(err, &e) || !e.Skipped {
		t.Fatalf("deadline: %v", err)
	}
	if f.Calls[1].Timeout != sluice.DefaultAskTimeoutMs {
		t.Fatalf("default timeout: %d", f.Calls[1].Timeout)
	}
}

func TestOverloadedKeepsScopeDepthLimit(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	f.FailWith = &sluice.Error{Code: sluice.CodeOverloaded, Message: "o", Scope: "host", Depth: 9, Limit: 8}
	err := host.Bus().Publish("a.b", "x")
	var e *sluice.Error
	if !errors.Is(err, sluice.ErrOverloaded) || !errors.As(err, &e) || e.Scope != "host" || e.Depth != 9 || e.Limit != 8 {
		t.Fatalf("overloaded: %#v", err)
	}
	rep := e.Report()
	if rep["type"] != "Overloaded" || rep["scope"] != "host" || rep["retry_after_ms"] != nil {
		t.Fatalf("report: %v", rep)
	}
}

func TestDispatchWithTargetsSeedShape(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	ctx := `{"tenant":"default","namespace":"default"}`
	res, err := host.Outbox().DispatchWithTargets(ctx, "Leader/1", []string{"W/1", "W/2", "W/3"},
		`{"type":"heartbeat","seq":1}`, "cast", "hb-key", "overwrite")
	if err != nil || res.Accepted != 2 || res.Rejected != 1 {
		t.Fatalf("dispatch: %+v %v", res, err)
	}
	req := f.Calls[0].Req
	if req.Conflict != "overwrite" || req.Mode != "cast" || req.IdempotencyKey != "hb-key" ||
		req.MsgType != sluice.DefaultDispatchMsgType || len(req.Targets) != 3 || req.Context != ctx {
		t.Fatalf("request: %+v", req)
	}
	// The seed also passes "" for mode/conflict: defaults.
	if _, err := host.Outbox().DispatchWithTargets(ctx, "L", []string{"W/1"}, "p", "cast", "", ""); err != nil {
		t.Fatal(err)
	}
	if f.Calls[1].Req.Conflict != "append" {
		t.Fatalf("default conflict: %q", f.Calls[1].Req.Conflict)
	}
	if _, err := host.Outbox().DispatchWithTargets(ctx, "L", nil, "p", "bogus", "", ""); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("bad mode: %v", err)
	}
	// The typed enums.
	if _, err := host.Outbox().DispatchWithTargets(ctx, "L", []string{"W/1"}, "p", sluice.ModeCall, "k", sluice.ConflictOverwrite); err != nil {
		t.Fatal(err)
	}
	if r := f.Calls[len(f.Calls)-1].Req; r.Mode != sluice.ModeCall || r.Conflict != sluice.ConflictOverwrite {
		t.Fatalf("typed mode/conflict: %+v", r)
	}
	if _, err := host.Outbox().Dispatch(sluice.DispatchRequest{Targets: []string{"W/1"}, Conflict: sluice.Conflict("last")}); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("bad conflict: %v", err)
	}
}

func TestTellReliableAndClock(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	if p, err := host.Outbox().TellReliable("A/1", "t", []byte("x")); err != nil || p != sluice.ViaOutbox {
		t.Fatalf("tell reliable: %v %v", p, err)
	}
	if host.NowMs() != 1234 || host.SelfID() != "Echo/1" {
		t.Fatal("clock/self")
	}
	host.Log(sluice.LevelWarn, "careful")
	if f.Logs[0] != "warn: careful" {
		t.Fatalf("log: %v", f.Logs)
	}
}

func TestWithDeadlineTightensAndRefusesBadBudgetsBeforeSending(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	if _, err := host.WithDeadline(250*time.Millisecond).Ask("W/1", "process", "x", 0); err != nil {
		t.Fatal(err)
	}
	if got := f.Calls[0].Timeout; got != 250 {
		t.Fatalf("deadline: %d", got)
	}
	host.WithDeadline(250*time.Millisecond).Ask("W/1", "process", "x", 5000)
	host.WithDeadline(250*time.Millisecond).Ask("W/1", "process", "x", 100)
	host.WithDeadline(1500*time.Microsecond).Ask("W/1", "process", "x", 0)
	if a, b, c := f.Calls[1].Timeout, f.Calls[2].Timeout, f.Calls[3].Timeout; a != 250 || b != 100 || c != 2 {
		t.Fatalf("only tightens, rounds up: %d %d %d", a, b, c)
	}
	for _, bad := range []time.Duration{0, -time.Second} {
		_, err := host.WithDeadline(bad).Ask("W/1", "process", "x", 0)
		var e *sluice.Error
		if !errors.Is(err, sluice.ErrInvalidArgument) || !errors.As(err, &e) {
			t.Fatalf("bad deadline %v: %v", bad, err)
		}
	}
	if len(f.Calls) != 4 {
		t.Fatalf("an invalid deadline sent %d calls", len(f.Calls)-4)
	}
}
