package sluicetest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

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
	all := sluice.NewDispatchResult(sluice.OutcomeDelivered, sluice.OutcomeDelivered, sluice.OutcomeDelivered)
	if err != nil || !reflect.DeepEqual(*res, all) || res.Delivered != 3 {
		t.Fatalf("dispatch delivers every target: %+v %v", res, err)
	}
}

func TestFailNextFailsTheNextCallsOfAnyKindInOrder(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	ctx := context.Background()
	missing := sluice.NotFound("NOT_FOUND: no actor W/9")
	full := sluice.ResourceExhausted("RESOURCE_EXHAUSTED: full", 3)
	fake.FailNext(missing, full)
	fake.FailNext(sluice.Unavailable("UNAVAILABLE: down"))
	if _, err := host.Tell(ctx, "W/9", "t", nil); err != missing {
		t.Fatalf("the first error fails the first call: %v", err)
	}
	if _, err := host.Ask(ctx, "W/1", "q", nil); err != full {
		t.Fatalf("the second, the next call of another kind: %v", err)
	}
	if err := host.Bus().Publish(ctx, "a.b", nil); !errors.Is(err, sluice.ErrUnavailable) {
		t.Fatalf("a later FailNext queues behind: %v", err)
	}
	if _, err := host.Tell(ctx, "W/9", "t", nil); err != nil {
		t.Fatalf("each error fails one call: %v", err)
	}
	if len(fake.Calls) != 4 {
		t.Fatalf("a failed call is recorded too: %d calls", len(fake.Calls))
	}
}

func TestAskReplyFuncAnswersFromTheRequest(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	ctx := context.Background()
	fake.AskReplyFunc = func(to, msgType string, payload []byte) ([]byte, error) {
		switch to {
		case "Gone/1":
			return nil, sluice.NotFound("NOT_FOUND: no actor Gone/1")
		case "Broken/1":
			return nil, errors.New("boom")
		}
		return []byte(to + " " + msgType + " " + string(payload)), nil
	}
	if out, err := host.Ask(ctx, "W/1", "double", map[string]int{"n": 2}); err != nil || string(out) != `W/1 double {"n":2}` {
		t.Fatalf("the reply is computed from the ask: %q %v", out, err)
	}
	if _, err := host.Ask(ctx, "Gone/1", "q", nil); !errors.Is(err, sluice.ErrNotFound) || err.Error() != "NOT_FOUND: no actor Gone/1" {
		t.Fatalf("a *sluice.Error reaches the asker as it is: %v", err)
	}
	var e *sluice.Error
	if _, err := host.Ask(ctx, "Broken/1", "q", nil); !errors.As(err, &e) || e.Code != sluice.CodeInternal || e.Message != "INTERNAL: boom" {
		t.Fatalf("a plain error reaches the asker as INTERNAL: %#v", err)
	}
	worker := &routedWorker{}
	fake.Route("Worker/1", worker)
	if out, err := host.Ask(ctx, "Worker/1", "work", "{}"); err != nil || !strings.Contains(string(out), `"me":"Worker/1"`) {
		t.Fatalf("a routed id is answered by its actor, not AskReplyFunc: %q %v", out, err)
	}
	fake.AskReplyFunc = nil
	if out, err := host.Ask(ctx, "W/1", "q", nil); err != nil || string(out) != "{}" {
		t.Fatalf("without AskReplyFunc, AskReply: %q %v", out, err)
	}
	if len(fake.Calls) != 5 || fake.Calls[1].To != "Gone/1" {
		t.Fatalf("every ask is recorded: %+v", fake.Calls)
	}
}

func TestFailOnFailsOnlyTheCallsItNamesInScriptOrder(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	ctx := context.Background()
	full := sluice.ResourceExhausted("RESOURCE_EXHAUSTED: full", 1)
	late := sluice.Errorf(sluice.CodeDeadlineExceeded, "call timed out")
	fake.FailOn("tell", "C/1", full, full)
	fake.FailOn("ask", "", late)
	fake.FailOn("", "W/2", full) // a dispatch naming W/2 among its targets
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `unknown op "Tell"`) {
				t.Fatalf("FailOn with an op that is not one of the eight panics naming it: %v", r)
			}
		}()
		fake.FailOn("Tell", "", full)
	}()
	if r, err := host.Tell(ctx, "C/2", "x", nil); r != sluice.Queued || err != nil {
		t.Fatalf("another target goes through: %v %v", r, err)
	}
	if _, err := host.Tell(ctx, "C/1", "x", nil); err != full {
		t.Fatalf("tell to C/1: %v", err)
	}
	dispatch := func(targets ...string) (*sluice.DispatchResult, error) {
		return host.Outbox().Dispatch(ctx, sluice.DispatchRequest{DispatcherID: "D/1", Targets: targets})
	}
	if res, err := dispatch("W/1"); err != nil || res.Delivered != 1 || len(res.Outcomes) != 1 {
		t.Fatalf("a dispatch without W/2 goes through: %+v %v", res, err)
	}
	if _, err := dispatch("W/1", "W/2"); !errors.Is(err, sluice.ErrResourceExhausted) {
		t.Fatalf("a dispatch naming W/2: %v", err)
	}
	if _, err := host.Tell(ctx, "C/1", "x", nil); err != full {
		t.Fatalf("the second error for C/1: %v", err)
	}
	if _, err := host.Tell(ctx, "C/1", "x", nil); err != nil {
		t.Fatalf("each error fails one call: %v", err)
	}
	if _, err := host.Ask(ctx, "C/1", "x", nil); !errors.Is(err, sluice.ErrDeadlineExceeded) {
		t.Fatalf("ask: %v", err)
	}
	if out, err := host.Ask(ctx, "C/1", "x", nil); err != nil || string(out) != "{}" {
		t.Fatalf("the next ask: %q %v", out, err)
	}
	if len(fake.Calls) != 8 {
		t.Fatalf("a failed call is recorded too: %d calls", len(fake.Calls))
	}
	// FailNext and FailOn queue together in script order; FailOn("", "") is FailNext.
	fake.FailOn("publish", "", full)
	fake.FailNext(sluice.NotFound("NOT_FOUND: x"))
	fake.FailOn("", "", late)
	if err := host.Bus().Publish(ctx, "a.b", nil); err != full {
		t.Fatalf("FailOn, scripted first, first: %v", err)
	}
	if err := host.Bus().Publish(ctx, "a.b", nil); !errors.Is(err, sluice.ErrNotFound) {
		t.Fatalf("then FailNext: %v", err)
	}
	if _, err := host.Tell(ctx, "Any/1", "x", nil); err != late {
		t.Fatalf("then FailOn(\"\", \"\"), which fails any call: %v", err)
	}
	if err := host.Bus().Publish(ctx, "a.b", nil); err != nil {
		t.Fatalf("nothing left: %v", err)
	}
}

func TestDispatchResultAndClockCanBeFunctionsOfTheCall(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	ctx := context.Background()
	fake.DispatchResultFunc = func(req sluice.DispatchRequest) sluice.DispatchResult {
		outcomes := []sluice.DispatchOutcome{sluice.OutcomeNotFound}
		for range req.Targets[1:] {
			outcomes = append(outcomes, sluice.OutcomeQueuedAtLimit)
		}
		return sluice.NewDispatchResult(outcomes...)
	}
	fake.TickMs = 2
	res, err := host.Outbox().Dispatch(ctx, sluice.DispatchRequest{Targets: []string{"W/1", "W/2", "W/3"}})
	want := sluice.DispatchResult{Queued: 2, DeadLettered: 1, Outcomes: []sluice.DispatchOutcome{
		sluice.OutcomeNotFound, sluice.OutcomeQueuedAtLimit, sluice.OutcomeQueuedAtLimit}}
	if err != nil || !reflect.DeepEqual(*res, want) {
		t.Fatalf("dispatch answered from its request: %+v %v", res, err)
	}
	if a, b := host.NowMs(), host.NowMs(); a != 1000 || b != 1002 || fake.Now != 1004 {
		t.Fatalf("every reading moves the clock on: %d %d %d", a, b, fake.Now)
	}
	fixed := sluice.NewDispatchResult(sluice.OutcomeQueuedRefused)
	fake.Result = &fixed
	res, err = host.Outbox().Dispatch(ctx, sluice.DispatchRequest{Targets: []string{"W/1"}})
	if err != nil || !reflect.DeepEqual(*res, fixed) || res.Queued != 1 {
		t.Fatalf("Result goes before DispatchResultFunc: %+v %v", res, err)
	}
}

// got is one message a routed test actor received.
type got struct {
	Sender, MsgType, Payload string
}

type routedWorker struct{ got []got }

func (*routedWorker) Init(string) error { return nil }

func (w *routedWorker) Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	w.got = append(w.got, got{env.Sender, env.MsgType, env.Text()})
	switch env.MsgType {
	case "bad":
		return nil, sluice.InvalidArgument("INVALID_ARGUMENT: bad")
	case "report":
		if _, err := host.Tell(ctx, "Leader/1", "done", map[string]string{"by": host.SelfID()}); err != nil {
			return nil, err
		}
	}
	d, _ := ctx.Deadline()
	return sluice.Reply(map[string]any{"me": host.SelfID(), "deadline": env.DeadlineMs, "has": !d.IsZero()})
}

type routedLeader struct {
	t    *testing.T
	done []string
}

func (*routedLeader) Init(string) error { return nil }

func (l *routedLeader) Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	if env.MsgType == "done" {
		var v struct{ By string }
		if err := env.JSON(&v); err != nil {
			return nil, err
		}
		l.done = append(l.done, v.By)
		return nil, nil
	}
	askCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	reply, err := host.Ask(askCtx, "Worker/1", "work", map[string]int{"n": 1})
	if err != nil {
		return nil, err
	}
	if _, err := host.Tell(ctx, "Worker/1", "report", "{}"); err != nil {
		return nil, err
	}
	if _, err := host.Outbox().DispatchWithTargets(ctx, "", "Leader/1", []string{"Worker/1", "Elsewhere/1"},
		`{"t":1}`, sluice.ModeCast, "k", sluice.ConflictAppend); err != nil {
		return nil, err
	}
	_, err = host.Ask(ctx, "Worker/1", "bad", "{}")
	if !errors.Is(err, sluice.ErrInvalidArgument) || err.Error() != "INVALID_ARGUMENT: bad" {
		l.t.Errorf("a routed ask's error reaches the asker as the worker returned it: %v", err)
	}
	return reply, nil
}

func TestRouteAsksAtOnceAndQueuesTellsAndDispatchesForRunQueued(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	worker, leader := &routedWorker{}, &routedLeader{t: t}
	fake.Route("Worker/1", worker)
	fake.Route("Leader/1", leader)

	out, err := fake.Handle(leader, &sluice.Envelope{MsgType: "start"})
	var reply struct {
		Me       string
		Deadline uint64
		Has      bool
	}
	if err != nil || json.Unmarshal(out, &reply) != nil || reply.Me != "Worker/1" || !reply.Has ||
		reply.Deadline == 0 || reply.Deadline > 300 {
		t.Fatalf("the ask ran Worker/1's turn with the ask's deadline: %s %v", out, err)
	}
	want := []got{{"Leader/1", "work", `{"n":1}`}, {"Leader/1", "bad", "{}"}}
	if !reflect.DeepEqual(worker.got, want) {
		t.Fatalf("worker got %+v", worker.got)
	}
	wantQueued := []sluicetest.Queued{
		{To: "Worker/1", MsgType: "report", Payload: []byte("{}"), Sender: "Leader/1"},
		{To: "Worker/1", MsgType: "dispatch", Payload: []byte(`{"t":1}`), Sender: "Leader/1"},
	}
	if !reflect.DeepEqual(fake.Queued, wantQueued) {
		t.Fatalf("queued %+v", fake.Queued)
	}
	if len(fake.Calls) != 4 {
		t.Fatalf("calls %+v", fake.Calls)
	}
	for _, c := range fake.Calls {
		if c.By != "Leader/1" {
			t.Fatalf("a call of Leader/1's turn: %+v", c)
		}
	}

	if errs := fake.RunQueued(); errs != nil {
		t.Fatalf("no turn failed: %v", errs)
	}
	want = append(want, got{"Leader/1", "report", "{}"}, got{"Leader/1", "dispatch", `{"t":1}`})
	if !reflect.DeepEqual(worker.got, want) || !reflect.DeepEqual(leader.done, []string{"Worker/1"}) {
		t.Fatalf("worker got %+v, leader done %v", worker.got, leader.done)
	}
	last := fake.Calls[len(fake.Calls)-1]
	if !reflect.DeepEqual(last, sluicetest.Call{Op: "tell", To: "Leader/1", MsgType: "done", Payload: []byte(`{"by":"Worker/1"}`), By: "Worker/1"}) {
		t.Fatalf("the worker's tell, made in a queued turn: %+v", last)
	}
	if len(fake.Queued) != 0 {
		t.Fatalf("RunQueued leaves nothing: %+v", fake.Queued)
	}

	// A queued turn's error comes back from RunQueued; an ask cycle is DEADLINE_EXCEEDED.
	ctx := context.Background()
	if _, err := host.Tell(ctx, "Worker/1", "bad", "{}"); err != nil {
		t.Fatal(err)
	}
	errs := fake.RunQueued()
	if len(errs) != 1 || errs[0].To != "Worker/1" || errs[0].MsgType != "bad" ||
		!errors.Is(errs[0].Err, sluice.ErrInvalidArgument) || errs[0].Err.Message != "INVALID_ARGUMENT: bad" {
		t.Fatalf("run queued: %+v", errs)
	}
	if g := worker.got[len(worker.got)-1]; g.Sender != "MyActor/1" {
		t.Fatalf("a tell from outside a routed turn is sent as Self: %+v", g)
	}
	var cycle sluice.HandlerFunc = func(ctx context.Context, _ *sluice.Envelope) ([]byte, error) {
		return host.Ask(ctx, "Cycle/1", "again", nil)
	}
	fake.Route("Cycle/1", cycle)
	_, err = host.Ask(ctx, "Cycle/1", "go", nil)
	var e *sluice.Error
	if !errors.As(err, &e) || e.Code != sluice.CodeDeadlineExceeded || !strings.Contains(e.Message, "in a turn already") {
		t.Fatalf("an ask cycle: %v", err)
	}
	if host.SelfID() != "MyActor/1" {
		t.Fatalf("outside a turn the fake is Self again: %q", host.SelfID())
	}
}

// reminderActor arms and cancels reminders as its messages say and replies what cancel said.
type reminderActor struct{}

func (*reminderActor) Init(string) error { return nil }

func (*reminderActor) Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	if env.MsgType == "cancel" {
		cancelled, err := host.Outbox().CancelReminder(ctx, env.Text())
		if err != nil {
			return nil, err
		}
		return sluice.Reply(map[string]bool{"cancelled": cancelled})
	}
	return nil, host.Outbox().Remind(ctx, env.Text(), 500, "wake", map[string]string{"by": host.SelfID()})
}

func TestRemindersStayPendingPerActorANameReplacesAndCancelsOnce(t *testing.T) {
	fake := sluicetest.New()
	sluice.SetBackend(fake)
	ctx := context.Background()
	if err := host.Outbox().Remind(ctx, "retry", 100, "retry", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if err := host.Outbox().Remind(ctx, "", 50, "tick", "a"); err != nil {
		t.Fatal(err)
	}
	if err := host.Outbox().Remind(ctx, "", 60, "tick", "b"); err != nil {
		t.Fatal(err)
	}
	fake.Now = 2000
	if err := host.Outbox().Remind(ctx, "retry", 300, "retry", map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	want := []sluicetest.Reminder{
		{Actor: "MyActor/1", DelayMs: 50, DueMs: 1050, MsgType: "tick", Payload: []byte("a")},
		{Actor: "MyActor/1", DelayMs: 60, DueMs: 1060, MsgType: "tick", Payload: []byte("b")},
		{Actor: "MyActor/1", Name: "retry", DelayMs: 300, DueMs: 2300, MsgType: "retry", Payload: []byte(`{"n":2}`)},
	}
	if !reflect.DeepEqual(fake.Reminders, want) {
		t.Fatalf("a re-armed name replaces its reminder (now last), an unnamed one adds one: %+v", fake.Reminders)
	}
	c := fake.Calls[3]
	if !reflect.DeepEqual(c, sluicetest.Call{Op: "remind", Name: "retry", MsgType: "retry", Payload: []byte(`{"n":2}`), DelayMs: 300}) {
		t.Fatalf("remind call: %+v", c)
	}
	if env := want[2].Envelope(); env.Sender != "MyActor/1" || !env.HasSender || env.MsgType != "retry" ||
		string(env.Payload) != `{"n":2}` || env.Principal != "system" || env.HasDeadline {
		t.Fatalf("a reminder comes from the actor itself: %+v", env)
	}
	for i, wantCancelled := range []bool{true, false} {
		if ok, err := host.Outbox().CancelReminder(ctx, "retry"); err != nil || ok != wantCancelled {
			t.Fatalf("cancel %d: %v %v", i, ok, err)
		}
	}
	if ok, err := host.Outbox().CancelReminder(ctx, ""); err != nil || ok {
		t.Fatalf(`"" names no reminder: %v %v`, ok, err)
	}
	if len(fake.Reminders) != 2 || fake.Reminders[0].Payload[0] != 'a' {
		t.Fatalf("cancel removes only the named one: %+v", fake.Reminders)
	}
	if c := fake.Calls[len(fake.Calls)-1]; c.Op != "cancel_reminder" || c.Name != "" {
		t.Fatalf("cancel call: %+v", c)
	}

	// Names are per actor: a routed actor's reminders are its own.
	fake.Reminders = nil
	worker := &reminderActor{}
	fake.Route("Worker/1", worker)
	host.Outbox().Remind(ctx, "poll", 10, "poll", nil)
	if _, err := fake.Handle(worker, &sluice.Envelope{MsgType: "arm", Payload: []byte("poll")}); err != nil {
		t.Fatal(err)
	}
	if len(fake.Reminders) != 2 || fake.Reminders[1].Actor != "Worker/1" || fake.Reminders[1].MsgType != "wake" ||
		string(fake.Reminders[1].Payload) != `{"by":"Worker/1"}` || fake.Calls[len(fake.Calls)-1].By != "Worker/1" {
		t.Fatalf("the same name armed by another actor is another reminder: %+v", fake.Reminders)
	}
	out, err := fake.Handle(worker, &sluice.Envelope{MsgType: "cancel", Payload: []byte("poll")})
	if err != nil || string(out) != `{"cancelled":true}` || len(fake.Reminders) != 1 || fake.Reminders[0].Actor != "MyActor/1" {
		t.Fatalf("a cancel takes out only its own actor's reminder: %s %v %+v", out, err, fake.Reminders)
	}

	// A failed call is recorded and changes nothing.
	full := sluice.ResourceExhausted("RESOURCE_EXHAUSTED: too many reminders", -1)
	fake.FailOn("cancel_reminder", "", sluice.Unavailable("UNAVAILABLE: no outbox"))
	fake.FailOn("remind", "", full)
	n := len(fake.Calls)
	if err := host.Outbox().Remind(ctx, "poll", 20, "poll", nil); err != full {
		t.Fatalf("remind: %v", err)
	}
	if ok, err := host.Outbox().CancelReminder(ctx, "poll"); ok || !errors.Is(err, sluice.ErrUnavailable) {
		t.Fatalf("a failed cancel: %v %v", ok, err)
	}
	if err := host.Outbox().Remind(ctx, "poll", 20, "poll", nil); err != nil {
		t.Fatalf("each error fails one call: %v", err)
	}
	if len(fake.Calls) != n+3 || len(fake.Reminders) != 1 || fake.Reminders[0].DelayMs != 20 {
		t.Fatalf("failed calls are recorded and change nothing: %d calls, %+v", len(fake.Calls)-n, fake.Reminders)
	}
}
