package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
	"sluice.dev/guest/sluicetest"
)

func u64(v uint64) *uint64 { return &v }

var bg = context.Background()

func TestFullMailboxIsResourceExhaustedWithExactMessage(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	msg := "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)"
	f.FailNext(&sluice.Error{Code: sluice.CodeResourceExhausted, Message: msg, RetryAfterMs: u64(12)})
	_, err := host.Tell(bg, "Worker/1", "job", "x")
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

func TestAskWithoutADeadlineSendsTheDefaultTimeout(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	reply, err := host.Ask(bg, "Worker/1", "process", map[string]int{"n": 1})
	if err != nil || string(reply) != "{}" {
		t.Fatalf("ask: %q %v", reply, err)
	}
	if c := f.Calls[0]; c.Op != "ask" || string(c.Payload) != `{"n":1}` || c.TimeoutMs != sluice.DefaultAskTimeoutMs {
		t.Fatalf("ask call: %+v", c)
	}
	f.FailNext(&sluice.Error{Code: sluice.CodeDeadlineExceeded, Message: "d", Skipped: true})
	_, err = host.Ask(bg, "Slow/1", "x", nil)
	var e *sluice.Error
	if !errors.Is(err, sluice.ErrDeadlineExceeded) || !errors.As(err, &e) || !e.Skipped {
		t.Fatalf("deadline: %v", err)
	}
}

func TestAskWithTimeoutSendsWhatIsLeftOfIt(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if _, err := host.Ask(ctx, "W/1", "process", "x"); err != nil {
		t.Fatal(err)
	}
	if got := f.Calls[0].TimeoutMs; got == 0 || got > 50 {
		t.Fatalf("a 50 ms context sent %d ms", got)
	}
	// Inside a turn with a deadline of 10 s, the earlier of the two counts.
	turn := sluice.TurnContext(&sluice.Envelope{DeadlineMs: 10_000, HasDeadline: true}, time.Now())
	short, cancel2 := context.WithTimeout(turn, 250*time.Millisecond)
	defer cancel2()
	host.Ask(turn, "W/1", "process", "x")
	host.Ask(short, "W/1", "process", "x")
	if a, b := f.Calls[1].TimeoutMs, f.Calls[2].TimeoutMs; a <= 9_000 || a > 10_000 || b == 0 || b > 250 {
		t.Fatalf("turn %d ms, 250 ms child %d ms", a, b)
	}
}

func TestADoneContextIsDeadlineExceededAndNothingIsSent(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	expired, cancel := context.WithTimeout(bg, -time.Second)
	defer cancel()
	cancelled, cancel2 := context.WithCancel(bg)
	cancel2()
	turnOver := sluice.TurnContext(&sluice.Envelope{DeadlineMs: 1, HasDeadline: true}, time.Now().Add(-time.Second))
	for _, ctx := range []context.Context{expired, cancelled, turnOver} {
		calls := map[string]func() error{
			"tell":  func() error { _, err := host.Tell(ctx, "W/1", "job", "x"); return err },
			"ask":   func() error { _, err := host.Ask(ctx, "W/1", "job", "x"); return err },
			"sched": func() error { return host.Schedule(ctx, 10, "tick", nil) },
			"dispatch": func() error {
				_, err := host.Outbox().Dispatch(ctx, sluice.DispatchRequest{Targets: []string{"W/1"}})
				return err
			},
			"dispatch_with_targets": func() error {
				_, err := host.Outbox().DispatchWithTargets(ctx, "", "L", []string{"W/1"}, "p", sluice.ModeCast, "", sluice.ConflictAppend)
				return err
			},
			"tell_reliable": func() error { _, err := host.Outbox().TellReliable(ctx, "W/1", "job", "x"); return err },
			"remind":        func() error { return host.Outbox().Remind(ctx, "r", 10, "tick", "x") },
			"cancel_reminder": func() error {
				_, err := host.Outbox().CancelReminder(ctx, "r")
				return err
			},
			"publish": func() error { return host.Bus().Publish(ctx, "a.b", "x") },
		}
		for op, call := range calls {
			err := call()
			var e *sluice.Error
			if !errors.Is(err, sluice.ErrDeadlineExceeded) || !errors.As(err, &e) ||
				!strings.HasPrefix(e.Message, "DEADLINE_EXCEEDED: ") || e.Type() != "DeadlineExceeded" {
				t.Errorf("%s with %v: %#v", op, ctx, err)
			}
		}
	}
	if len(f.Calls) != 0 {
		t.Fatalf("a done context reached the host: %+v", f.Calls)
	}
}

func TestOverloadedKeepsScopeDepthLimit(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	f.FailNext(&sluice.Error{Code: sluice.CodeOverloaded, Message: "o", Scope: "host", Depth: 9, Limit: 8})
	err := host.Bus().Publish(bg, "a.b", "x")
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
	dctx := `{"tenant":"default","namespace":"default"}`
	res, err := host.Outbox().DispatchWithTargets(bg, dctx, "Leader/1", []string{"W/1", "W/2", "W/3"},
		`{"type":"heartbeat","seq":1}`, sluice.ModeCast, "hb-key", sluice.ConflictOverwrite)
	if err != nil || res.Delivered != 3 || res.Queued != 0 || len(res.Outcomes) != 3 || res.Outcomes[2] != sluice.OutcomeDelivered {
		t.Fatalf("dispatch (the fake delivers every target): %+v %v", res, err)
	}
	req := f.Calls[0].Req
	if req.Conflict != sluice.ConflictOverwrite || req.Mode != sluice.ModeCast || req.IdempotencyKey != "hb-key" ||
		req.MsgType != sluice.DefaultDispatchMsgType || len(req.Targets) != 3 || req.Context != dctx {
		t.Fatalf("request: %+v", req)
	}
	// The zero values are the WIT defaults, cast and append.
	scripted := sluice.NewDispatchResult(sluice.OutcomeQueuedBehindPending)
	f.Result = &scripted
	res, err = host.Outbox().Dispatch(bg, sluice.DispatchRequest{Targets: []string{"W/1"}, Payload: []byte("p")})
	if err != nil || res.Queued != 1 || res.Outcomes[0] != sluice.OutcomeQueuedBehindPending {
		t.Fatalf("scripted result: %+v %v", res, err)
	}
	if r := f.Calls[1].Req; r.Mode != sluice.ModeCast || r.Conflict != sluice.ConflictAppend || r.MsgType != "dispatch" {
		t.Fatalf("defaults: %+v", r)
	}
	if _, err := host.Outbox().DispatchWithTargets(bg, dctx, "L", []string{"W/1"}, "p", sluice.ModeCall, "k", sluice.ConflictOverwrite); err != nil {
		t.Fatal(err)
	}
	if r := f.Calls[2].Req; r.Mode != sluice.ModeCall || r.Conflict != sluice.ConflictOverwrite {
		t.Fatalf("typed mode/conflict: %+v", r)
	}
}

func TestAnOutOfRangeModeOrConflictIsInvalidArgumentAndNothingIsSent(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	for _, req := range []sluice.DispatchRequest{
		{Targets: []string{"W/1"}, Mode: sluice.DispatchMode(2)},
		{Targets: []string{"W/1"}, Conflict: sluice.Conflict(7)},
	} {
		_, err := host.Outbox().Dispatch(bg, req)
		var e *sluice.Error
		if !errors.Is(err, sluice.ErrInvalidArgument) || !errors.As(err, &e) || !strings.HasPrefix(e.Message, "INVALID_ARGUMENT: unknown ") {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	if _, err := host.Outbox().DispatchWithTargets(bg, "", "L", nil, "p", 9, "", sluice.ConflictAppend); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("bad mode: %v", err)
	}
	if len(f.Calls) != 0 {
		t.Fatalf("an invalid request reached the host: %+v", f.Calls)
	}
}

func TestTellReliableScheduleAndTheFakesDefaults(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	if p, err := host.Outbox().TellReliable(bg, "A/1", "t", []byte("x")); err != nil || p != sluice.Direct {
		t.Fatalf("tell reliable: %v %v", p, err)
	}
	if r, err := host.Tell(bg, "A/1", "t", "x"); err != nil || r != sluice.Queued {
		t.Fatalf("tell: %v %v", r, err)
	}
	if err := host.Schedule(bg, 50, "tick", "t"); err != nil || f.Calls[2].DelayMs != 50 || f.Calls[2].Op != "schedule" {
		t.Fatalf("schedule: %v %+v", err, f.Calls[2])
	}
	if host.NowMs() != 1000 || host.SelfID() != "MyActor/1" {
		t.Fatalf("clock/self: %d %s", host.NowMs(), host.SelfID())
	}
	host.Log(sluice.LevelWarn, "careful")
	host.Logf("n=%d", 3)
	if len(f.Logs) != 2 || f.Logs[0] != "warn: careful" || f.Logs[1] != "info: n=3" {
		t.Fatalf("log: %v", f.Logs)
	}
}

func TestRemindEncodesThePayloadAndKeepsTheHostsErrors(t *testing.T) {
	f := sluicetest.New()
	sluice.SetBackend(f)
	if err := host.Outbox().Remind(bg, "retry", 250, "retry", map[string]int{"attempt": 2}); err != nil {
		t.Fatal(err)
	}
	if err := host.Outbox().Remind(bg, "", 0, "tick", nil); err != nil {
		t.Fatal(err)
	}
	c := f.Calls[0]
	if c.Op != "remind" || c.Name != "retry" || c.DelayMs != 250 || c.MsgType != "retry" || string(c.Payload) != `{"attempt":2}` {
		t.Fatalf("remind: %+v", c)
	}
	if err := host.Outbox().Remind(bg, "x", 1, "t", func() {}); !errors.Is(err, sluice.ErrInvalidArgument) || len(f.Calls) != 2 {
		t.Fatalf("a payload that is not JSON-able is INVALID_ARGUMENT and not sent: %v", err)
	}
	msg := "RESOURCE_EXHAUSTED: 100 reminders pending"
	f.FailNext(&sluice.Error{Code: sluice.CodeResourceExhausted, Message: msg})
	err := host.Outbox().Remind(bg, "more", 1, "t", "p")
	var e *sluice.Error
	if !errors.Is(err, sluice.ErrResourceExhausted) || !errors.As(err, &e) || e.Error() != msg || e.Type() != "ResourceExhausted" {
		t.Fatalf("remind's error: %#v", err)
	}
	if ok, err := host.Outbox().CancelReminder(bg, "retry"); err != nil || !ok {
		t.Fatalf("cancel a pending one: %v %v", ok, err)
	}
	if ok, err := host.Outbox().CancelReminder(bg, "retry"); err != nil || ok {
		t.Fatalf("cancel it again: %v %v", ok, err)
	}
	f.FailNext(sluice.Unavailable("UNAVAILABLE: this host has no outbox"))
	if ok, err := host.Outbox().CancelReminder(bg, "retry"); ok || !errors.Is(err, sluice.ErrUnavailable) || err.Error() != "UNAVAILABLE: this host has no outbox" {
		t.Fatalf("cancel's error: %v %v", ok, err)
	}
}
