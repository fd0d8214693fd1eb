package sluice_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	sluice "sluice.dev/guest"
)

func TestTurnContextDeadlineIsTurnStartPlusDeadlineMs(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := sluice.TurnContext(&sluice.Envelope{DeadlineMs: 250, HasDeadline: true}, start)
	d, ok := ctx.Deadline()
	if !ok || !d.Equal(start.Add(250*time.Millisecond)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	if ctx.Done() != nil {
		t.Fatal("Done must be nil: nothing can close it during a synchronous turn")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("a deadline in 2025 has passed: %v", ctx.Err())
	}
	if e := sluice.ContextError(ctx); e == nil || !errors.Is(e, sluice.ErrDeadlineExceeded) {
		t.Fatalf("context error: %v", e)
	}
}

func TestTurnContextWithoutHasDeadlineHasNoDeadline(t *testing.T) {
	// DeadlineMs without HasDeadline means nothing.
	ctx := sluice.TurnContext(&sluice.Envelope{DeadlineMs: 5}, time.Now().Add(-time.Hour))
	if _, ok := ctx.Deadline(); ok || ctx.Err() != nil || sluice.ContextError(ctx) != nil {
		t.Fatalf("no deadline expected: %v", ctx)
	}
}

func TestCallHandleGivesTheHandlerTheContextItWasPassed(t *testing.T) {
	var got context.Context
	sluice.Register(sluice.HandlerFunc(func(ctx context.Context, _ *sluice.Envelope) ([]byte, error) {
		got = ctx
		return nil, nil
	}))
	env := &sluice.Envelope{MsgType: "x", DeadlineMs: 1000, HasDeadline: true}
	start := time.Now()
	want := sluice.TurnContext(env, start)
	if _, e := sluice.CallHandle(want, env); e != nil {
		t.Fatal(e)
	}
	if d, ok := got.Deadline(); !ok || !d.Equal(start.Add(time.Second)) || got.Err() != nil {
		t.Fatalf("handler saw %v (deadline %v %v, err %v)", got, d, ok, got.Err())
	}
}

func TestTurnContextErrFlipsToDeadlineExceededOnceTheDeadlinePasses(t *testing.T) {
	ctx := sluice.TurnContext(&sluice.Envelope{DeadlineMs: 20, HasDeadline: true}, time.Now())
	if err := ctx.Err(); err != nil {
		t.Fatalf("before the deadline: %v", err)
	}
	// Err reads the clock on every call: poll it (no timer, no goroutine) for at most 5 s.
	bound := time.Now().Add(5 * time.Second)
	for ctx.Err() == nil {
		if time.Now().After(bound) {
			t.Fatal("Err still nil 5 s after a 20 ms deadline")
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("after the deadline: %v", ctx.Err())
	}
}

func TestAChildWithTimeoutReportsTheEarlierDeadline(t *testing.T) {
	start := time.Now()
	turn := sluice.TurnContext(&sluice.Envelope{DeadlineMs: 10_000, HasDeadline: true}, start)
	short, cancel := context.WithTimeout(turn, 50*time.Millisecond)
	defer cancel()
	if d, _ := short.Deadline(); !d.Before(start.Add(time.Second)) {
		t.Fatalf("a 50 ms child of a 10 s turn: %v", d)
	}
	long, cancel2 := context.WithTimeout(turn, time.Hour)
	defer cancel2()
	if d, _ := long.Deadline(); !d.Equal(start.Add(10 * time.Second)) {
		t.Fatalf("a 1 h child keeps the turn's deadline: %v", d)
	}
}

func TestContextErrorIsDeadlineExceededForBothKindsAndMatchesTheContextError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	// A child whose timer has not fired yet (none fires while this goroutine runs) is done
	// by its deadline alone.
	expired := &deadlineOnly{time.Now().Add(-time.Millisecond)}
	for _, c := range []struct {
		ctx   context.Context
		cause error
		msg   string
	}{
		{cancelled, context.Canceled, "DEADLINE_EXCEEDED: context canceled (not sent)"},
		{expired, context.DeadlineExceeded, "DEADLINE_EXCEEDED: context deadline exceeded (not sent)"},
	} {
		e := sluice.ContextError(c.ctx)
		if e == nil || e.Code != sluice.CodeDeadlineExceeded || e.Message != c.msg ||
			!errors.Is(e, sluice.ErrDeadlineExceeded) || !errors.Is(e, c.cause) {
			t.Fatalf("%v: %#v", c.cause, e)
		}
	}
	if e := sluice.ContextError(context.Background()); e != nil {
		t.Fatalf("background: %v", e)
	}
}

// deadlineOnly has a deadline and never reports Err itself, like a context.WithTimeout child
// whose timer has not run.
type deadlineOnly struct{ d time.Time }

func (c *deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }
func (c *deadlineOnly) Done() <-chan struct{}       { return nil }
func (c *deadlineOnly) Err() error                  { return nil }
func (c *deadlineOnly) Value(any) any               { return nil }

func TestEnumsHaveWitNamesAndZeroValuesAreTheWitDefaults(t *testing.T) {
	var mode sluice.DispatchMode
	var conflict sluice.Conflict
	if mode != sluice.ModeCast || conflict != sluice.ConflictAppend {
		t.Fatal("zero values must be cast and append")
	}
	for _, c := range []struct {
		got, want string
	}{
		{sluice.ModeCast.String(), "cast"}, {sluice.ModeCall.String(), "call"},
		{sluice.ConflictAppend.String(), "append"}, {sluice.ConflictOverwrite.String(), "overwrite"},
		{sluice.DispatchMode(7).String(), "DispatchMode(7)"}, {sluice.Conflict(9).String(), "Conflict(9)"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if sluice.DispatchMode(2).Valid() || sluice.Conflict(2).Valid() || !sluice.ModeCall.Valid() {
		t.Fatal("Valid")
	}
}

func TestEnumsRoundTripThroughJSONAndRefuseUnknownNames(t *testing.T) {
	type req struct {
		Mode     sluice.DispatchMode `json:"mode"`
		Conflict sluice.Conflict     `json:"conflict"`
	}
	b, err := json.Marshal(req{sluice.ModeCall, sluice.ConflictOverwrite})
	if err != nil || string(b) != `{"mode":"call","conflict":"overwrite"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	var r req
	if err := json.Unmarshal([]byte(`{"mode":"call","conflict":"overwrite"}`), &r); err != nil ||
		r != (req{sluice.ModeCall, sluice.ConflictOverwrite}) {
		t.Fatalf("unmarshal: %+v %v", r, err)
	}
	if err := json.Unmarshal([]byte(`{"mode":"broadcast"}`), &r); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("unknown mode: %v", err)
	}
	if _, err := json.Marshal(req{Conflict: 5}); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("marshal out of range: %v", err)
	}
}

func TestDispatchOutcomesHaveWitNamesAndAddUpToTheCounts(t *testing.T) {
	names := []string{"delivered", "deduplicated", "queued-behind-pending", "queued-at-limit",
		"queued-refused", "queued-failed", "queued-out-of-time", "not-found", "expired", "dead-lettered"}
	var all []sluice.DispatchOutcome
	for i, name := range names {
		o := sluice.DispatchOutcome(i)
		if o.String() != name || !o.Valid() {
			t.Fatalf("outcome %d is %q, want %q", i, o, name)
		}
		all = append(all, o)
	}
	if sluice.DispatchOutcome(10).Valid() || sluice.DispatchOutcome(10).String() != "DispatchOutcome(10)" {
		t.Fatal("out of range")
	}
	r := sluice.NewDispatchResult(all...)
	if r.Delivered != 1 || r.Deduplicated != 1 || r.Queued != 5 || r.DeadLettered != 3 || len(r.Outcomes) != 10 {
		t.Fatalf("counts: %+v", r)
	}
	b, err := json.Marshal(r.Outcomes[6:8])
	if err != nil || string(b) != `["queued-out-of-time","not-found"]` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	var back []sluice.DispatchOutcome
	if err := json.Unmarshal(b, &back); err != nil || back[1] != sluice.OutcomeNotFound {
		t.Fatalf("unmarshal: %v %v", back, err)
	}
}
