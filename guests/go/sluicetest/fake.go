// Package sluicetest is a fake Sluice host for unit-testing Go actors and the SDK: install it
// with sluice.SetBackend(fake), run turns with fake.Handle, and script its failures.
//
//	fake := sluicetest.New()
//	sluice.SetBackend(fake)
//	fake.AskReply = []byte(`{"done":true}`) // or AskReplyFunc, computed from each ask
//	out, err := fake.Handle(&myActor{}, &sluice.Envelope{MsgType: "forward", Payload: []byte(`{"job":1}`)})
//	// fake.Calls[0]: Op "ask", To "Worker/1", TimeoutMs as the actor's context gave it
//
// Failures are scripted in a queue, as in the other SDKs' fakes: FailNext(errs...) fails the
// next fallible calls of any kind, FailOn(op, to, errs...) only the calls it names.
//
// Its defaults are those of the Python, TypeScript and Rust fakes: SelfID "MyActor/1", NowMs
// 1000 (standing still unless TickMs moves it on every reading), Ask answers "{}", Tell is
// sluice.Queued, TellReliable goes sluice.Direct, and Dispatch delivers every target unless
// Result or DispatchResultFunc says otherwise. Reminders (host.Outbox().Remind) are kept
// pending in fake.Reminders, a re-armed name replacing its reminder, until CancelReminder
// takes them out; they are never delivered (deliver one with Handle and its Envelope).
//
// Several actors are tested together by routing their ids to in-process instances:
//
//	fake.Route("Worker/1", worker) // an ask to Worker/1 runs worker's turn at once
//	fake.Route("Leader/1", leader) // a tell or dispatch to Leader/1 waits in fake.Queued
//	fake.Handle(leader, &sluice.Envelope{MsgType: "start"}) // runs as Leader/1 (host.SelfID())
//	errs := fake.RunQueued() // delivers what waits (and what that sends); empty: no error
//
// The fake is not a host: it has no mailbox bounds, no outbox (no idempotency keys, retries
// or dead letters) and no timers (a schedule is only recorded, a reminder only kept pending);
// those are the host's, tested against a real one.
package sluicetest

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	sluice "sluice.dev/guest"
)

// The ops a Call records, one per fallible host import.
var ops = []string{"tell", "ask", "schedule", "dispatch", "tell_reliable", "remind", "cancel_reminder", "publish"}

// maxQueuedTurns bounds RunQueued: actors that keep telling each other never run dry.
const maxQueuedTurns = 100_000

// Call is one recorded fallible host call, as the host received it.
type Call struct {
	// Op is the import: "tell", "ask", "schedule", "dispatch", "tell_reliable", "remind",
	// "cancel_reminder", "publish".
	Op string
	// To is the target actor id; the topic for "publish"; "" for "schedule", "dispatch",
	// "remind" and "cancel_reminder".
	To string
	// Name is the reminder's name for "remind" and "cancel_reminder" ("" for an unnamed one).
	Name    string
	MsgType string
	Payload []byte
	// TimeoutMs is the timeout an "ask" was sent with: what was left of its context's
	// deadline, or sluice.DefaultAskTimeoutMs without one.
	TimeoutMs uint64
	// DelayMs is the delay of a "schedule" or a "remind".
	DelayMs uint64
	// Req is the request of a "dispatch", exactly as sent.
	Req *sluice.DispatchRequest
	// By is the routed actor (Route) whose turn made the call; "" for an actor not routed.
	By string
}

// Queued is a message to a routed actor that waits for RunQueued: a tell, a tell_reliable,
// or one target of a dispatch (its MsgType, sent by its DispatcherID, as the outbox delivers
// it). It is delivered with HasSender set, principal "system" and no deadline.
type Queued struct {
	To      string
	MsgType string
	Payload []byte
	Sender  string
}

// Reminder is a pending reminder (host.Outbox().Remind), as the outbox would hold it.
type Reminder struct {
	// Actor is the id it is for, and delivered to and from: the routed actor whose turn armed
	// it (Route), else Self.
	Actor string
	// Name is its name, "" for an unnamed one (which only firing would end, and the fake never
	// fires it).
	Name    string
	DelayMs uint64
	// DueMs is when it is due: Now when it was armed plus DelayMs (saturating).
	DueMs   uint64
	MsgType string
	Payload []byte
}

// Envelope is the message the host delivers when r fires: r's MsgType and Payload, from
// r.Actor to itself, principal "system", no deadline. fake.Handle(actor, r.Envelope()) runs
// the turn it would start.
func (r Reminder) Envelope() *sluice.Envelope {
	return &sluice.Envelope{
		Sender: r.Actor, HasSender: true, MsgType: r.MsgType, Payload: r.Payload, Principal: "system",
	}
}

// TurnError is a queued message whose turn failed (RunQueued returns them).
type TurnError struct {
	To      string
	MsgType string
	Payload []byte
	Err     *sluice.Error
}

// Error is the turn's error message, so a TurnError prints as what went wrong.
func (e TurnError) Error() string { return e.To + " " + e.MsgType + ": " + e.Err.Error() }

// failure is an error scripted by FailNext or FailOn and the calls it may fail ("": any).
type failure struct {
	err    *sluice.Error
	op, to string
}

// route is one Route: an id and the actor its calls reach.
type route struct {
	id    string
	actor sluice.Actor
}

// frame is a turn in progress: the actor, its routed id ("" when not routed), its principal.
type frame struct {
	actor     sluice.Actor
	routedAs  string
	principal string
}

// Fake records calls (Calls, Logs) and answers them from its fields, which a test may change
// at any time. FailNext makes the next fallible calls fail (each is recorded all the same);
// FailOn fails only the calls it names. A call refused before sending (a done context, an
// invalid mode) never reaches the fake, so it records nothing.
type Fake struct {
	Calls []Call
	Logs  []string // "level: message" per Log
	Self  string   // SelfID outside the turn of a routed actor
	Now   uint64   // NowMs
	// TickMs is how far every NowMs reading moves Now on (after the reading), so a busy-wait
	// on the clock ends; 0 keeps the clock still.
	TickMs   uint64
	AskReply []byte // what Ask answers for an id not routed, while AskReplyFunc is nil
	// AskReplyFunc, when set, answers each ask to an id not routed from its request, in place
	// of AskReply. An error it returns reaches the asker as the host would give it: a
	// *sluice.Error as it is, any other error as INTERNAL with its message.
	AskReplyFunc func(to, msgType string, payload []byte) ([]byte, error)
	Receipt      sluice.Receipt      // what Tell returns
	Path         sluice.DeliveryPath // where TellReliable says the message went
	// Result is what Dispatch returns; nil: DispatchResultFunc's answer, or when that is nil
	// too, every target OutcomeDelivered.
	Result *sluice.DispatchResult
	// DispatchResultFunc answers each Dispatch from its request while Result is nil;
	// sluice.NewDispatchResult makes its answer from per-target outcomes.
	DispatchResultFunc func(req sluice.DispatchRequest) sluice.DispatchResult
	// Queued holds the messages to routed actors not delivered yet, oldest first (RunQueued).
	Queued []Queued
	// Reminders holds the pending reminders of every actor, in the order they were armed:
	// Remind appends one, removing the pending one of the same Actor and non-empty Name (a
	// re-armed name moves to the end); CancelReminder removes the one of that Actor and Name.
	// A failed call changes nothing. The fake never fires them and sets no limit on how many
	// are pending (script RESOURCE_EXHAUSTED with FailOn("remind", "", err)).
	Reminders []Reminder

	failures []failure
	routes   []route
	turns    []frame // innermost last
}

// New returns a fake with the defaults every SDK's fake shares (see the package doc).
func New() *Fake {
	return &Fake{
		Self: "MyActor/1", Now: 1000, AskReply: []byte("{}"),
		Receipt: sluice.Queued, Path: sluice.Direct,
	}
}

// FailNext makes the next fallible calls, of any kind and to any target, fail with errs, one
// call each, in order. A failed call is recorded all the same. Errors scripted by FailNext
// and FailOn queue up together: each call takes the first one scripted that matches it.
func (f *Fake) FailNext(errs ...*sluice.Error) {
	for _, e := range errs {
		f.failures = append(f.failures, failure{err: e})
	}
}

// FailOn makes the next calls that are op ("tell", "ask", ...; "" for any) and go to to (""
// for any) fail with errs, one call each, in order; other calls go through. to is the topic
// of a "publish" and any of the targets of a "dispatch" ("remind" and "cancel_reminder" have
// none: name them with to ""). A failed call is recorded all the same. FailOn("", "",
// errs...) names every call: it is FailNext(errs...). A typo in op would leave the errors
// waiting for calls that never come, so FailOn panics on an op that is not one of the eight,
// naming them.
func (f *Fake) FailOn(op, to string, errs ...*sluice.Error) {
	if op != "" && !slices.Contains(ops, op) {
		panic(fmt.Sprintf("sluicetest: FailOn: unknown op %q (want one of %v)", op, ops))
	}
	for _, e := range errs {
		f.failures = append(f.failures, failure{err: e, op: op, to: to})
	}
}

// Route makes calls to id reach a in this process: an ask runs its turn at once and answers
// with its reply or its error (AskReply and AskReplyFunc are not used); a tell, a tell_reliable and each
// routed target of a dispatch wait in Queued until RunQueued. While its turn runs,
// host.SelfID() is id and the calls it makes are recorded with By id; so it is when the test
// hands a to Handle. An ask to an actor that is in a turn already (a cycle) fails
// DEADLINE_EXCEEDED, as it would on a host once its deadline passed; the call itself is
// still recorded and can be failed with FailOn. Routing an id again replaces its actor.
//
// Handle recognises a routed actor with ==: route a pointer (&worker{}), as actors usually
// are. A value that cannot be compared (a sluice.HandlerFunc) is reached through its id only.
func (f *Fake) Route(id string, a sluice.Actor) {
	for i := range f.routes {
		if f.routes[i].id == id {
			f.routes[i].actor = a
			return
		}
	}
	f.routes = append(f.routes, route{id, a})
}

// RunQueued delivers the Queued messages, oldest first, each in a turn of its routed actor
// (sender set, principal "system", no deadline), including the messages those turns queue,
// until none is left. It returns the ones whose turn failed (a told message's error reaches
// no caller), nil when none did. It panics after 100,000 turns with messages still queued,
// or on a message whose To is not routed.
func (f *Fake) RunQueued() []TurnError {
	var errs []TurnError
	for range maxQueuedTurns {
		if len(f.Queued) == 0 {
			return errs
		}
		q := f.Queued[0]
		f.Queued = f.Queued[1:]
		a, ok := f.routed(q.To)
		if !ok {
			panic("sluicetest: RunQueued: " + q.To + " is not routed")
		}
		env := &sluice.Envelope{
			Sender: q.Sender, HasSender: true, MsgType: q.MsgType, Payload: q.Payload, Principal: "system",
		}
		if _, err := f.turn(a, q.To, env); err != nil {
			errs = append(errs, TurnError{To: q.To, MsgType: q.MsgType, Payload: q.Payload, Err: err})
		}
	}
	panic(fmt.Sprintf("sluicetest: RunQueued: still %d queued after %d turns", len(f.Queued), maxQueuedTurns))
}

// Handle delivers env to a as a host does and returns what the caller would get: a.Handle
// runs with the turn's context (sluice.TurnContext: env.DeadlineMs from now when
// env.HasDeadline), as a's routed id when it has one (Route), and an error comes back as the
// *sluice.Error the caller would see (a plain error becomes INTERNAL). Calling a.Handle
// directly with a context of the test's choosing works too (as the fake's Self).
func (f *Fake) Handle(a sluice.Actor, env *sluice.Envelope) ([]byte, error) {
	var routedAs string
	for _, r := range f.routes {
		if sameActor(r.actor, a) {
			routedAs = r.id
			break
		}
	}
	out, err := f.turn(a, routedAs, env)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// turn runs one turn of a as routedAs ("" when not routed).
func (f *Fake) turn(a sluice.Actor, routedAs string, env *sluice.Envelope) ([]byte, *sluice.Error) {
	principal := env.Principal
	if principal == "" {
		principal = "system" // what a host gives a message nobody named a principal for
	}
	f.turns = append(f.turns, frame{actor: a, routedAs: routedAs, principal: principal})
	defer func() { f.turns = f.turns[:len(f.turns)-1] }()
	out, err := a.Handle(sluice.TurnContext(env, time.Now()), env)
	if err != nil {
		return nil, sluice.AsError(err)
	}
	return out, nil
}

// sameActor reports whether a and b are the same actor: equal and comparable.
func sameActor(a, b sluice.Actor) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t != nil && t.Comparable() && a == b
}

// routed is the actor routed at id.
func (f *Fake) routed(id string) (sluice.Actor, bool) {
	for _, r := range f.routes {
		if r.id == id {
			return r.actor, true
		}
	}
	return nil, false
}

// currentID is the routed id of the turn running ("" outside a routed actor's turn).
func (f *Fake) currentID() string {
	if len(f.turns) == 0 {
		return ""
	}
	return f.turns[len(f.turns)-1].routedAs
}

// sender is the id the running actor sends as.
func (f *Fake) sender() string {
	if id := f.currentID(); id != "" {
		return id
	}
	return f.Self
}

func (f *Fake) record(c Call) error {
	c.By = f.currentID()
	f.Calls = append(f.Calls, c)
	for i, fl := range f.failures {
		if fl.matches(c) {
			f.failures = slices.Delete(f.failures, i, i+1)
			return fl.err
		}
	}
	return nil
}

func (fl failure) matches(c Call) bool {
	if fl.op != "" && c.Op != fl.op {
		return false
	}
	if fl.to == "" {
		return true
	}
	if c.Req != nil {
		return slices.Contains(c.Req.Targets, fl.to)
	}
	return c.To == fl.to
}

// enqueue queues a message to to when to is routed.
func (f *Fake) enqueue(to, msgType string, payload []byte, sender string) {
	if _, ok := f.routed(to); ok {
		f.Queued = append(f.Queued, Queued{To: to, MsgType: msgType, Payload: payload, Sender: sender})
	}
}

// Tell implements sluice.Backend.
func (f *Fake) Tell(to, msgType string, payload []byte) (sluice.Receipt, error) {
	if err := f.record(Call{Op: "tell", To: to, MsgType: msgType, Payload: payload}); err != nil {
		return "", err
	}
	f.enqueue(to, msgType, payload, f.sender())
	return f.Receipt, nil
}

// Ask implements sluice.Backend. An ask to a routed id runs that actor's turn now, with
// timeoutMs as its deadline and the asking turn's principal.
func (f *Fake) Ask(to, msgType string, payload []byte, timeoutMs uint64) ([]byte, error) {
	if err := f.record(Call{Op: "ask", To: to, MsgType: msgType, Payload: payload, TimeoutMs: timeoutMs}); err != nil {
		return nil, err
	}
	a, ok := f.routed(to)
	if !ok {
		if f.AskReplyFunc == nil {
			return f.AskReply, nil
		}
		out, err := f.AskReplyFunc(to, msgType, payload)
		if err != nil {
			return nil, sluice.AsError(err)
		}
		return out, nil
	}
	for _, t := range f.turns {
		if t.routedAs == to || sameActor(t.actor, a) {
			return nil, sluice.Errorf(sluice.CodeDeadlineExceeded, "%s is in a turn already (an ask cycle)", to)
		}
	}
	principal := "system"
	if len(f.turns) > 0 {
		principal = f.turns[len(f.turns)-1].principal
	}
	env := &sluice.Envelope{
		Sender: f.sender(), HasSender: true, MsgType: msgType, Payload: payload,
		Principal: principal, DeadlineMs: timeoutMs, HasDeadline: true,
	}
	out, err := f.turn(a, to, env)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Schedule implements sluice.Backend.
func (f *Fake) Schedule(delayMs uint64, msgType string, payload []byte) error {
	return f.record(Call{Op: "schedule", MsgType: msgType, Payload: payload, DelayMs: delayMs})
}

// SelfID implements sluice.Backend: the routed id in a routed actor's turn, else Self.
func (f *Fake) SelfID() string { return f.sender() }

// NowMs implements sluice.Backend: Now, which then moves on by TickMs.
func (f *Fake) NowMs() uint64 {
	now := f.Now
	f.Now += f.TickMs
	return now
}

// Log implements sluice.Backend.
func (f *Fake) Log(level sluice.Level, msg string) { f.Logs = append(f.Logs, string(level)+": "+msg) }

// Dispatch implements sluice.Backend.
func (f *Fake) Dispatch(req sluice.DispatchRequest) (sluice.DispatchResult, error) {
	if err := f.record(Call{Op: "dispatch", MsgType: req.MsgType, Payload: req.Payload, Req: &req}); err != nil {
		return sluice.DispatchResult{}, err
	}
	for _, to := range req.Targets {
		f.enqueue(to, req.MsgType, req.Payload, req.DispatcherID)
	}
	switch {
	case f.Result != nil:
		return *f.Result, nil
	case f.DispatchResultFunc != nil:
		return f.DispatchResultFunc(req), nil
	}
	outcomes := make([]sluice.DispatchOutcome, len(req.Targets)) // zero: OutcomeDelivered
	return sluice.NewDispatchResult(outcomes...), nil
}

// TellReliable implements sluice.Backend.
func (f *Fake) TellReliable(to, msgType string, payload []byte) (sluice.DeliveryPath, error) {
	if err := f.record(Call{Op: "tell_reliable", To: to, MsgType: msgType, Payload: payload}); err != nil {
		return "", err
	}
	f.enqueue(to, msgType, payload, f.sender())
	return f.Path, nil
}

// Remind implements sluice.Backend: a pending reminder at the end of Reminders for the running
// actor, which replaces the pending one of the same non-empty name.
func (f *Fake) Remind(name string, delayMs uint64, msgType string, payload []byte) error {
	if err := f.record(Call{Op: "remind", Name: name, MsgType: msgType, Payload: payload, DelayMs: delayMs}); err != nil {
		return err
	}
	due := f.Now + delayMs
	if due < f.Now {
		due = math.MaxUint64
	}
	r := Reminder{Actor: f.sender(), Name: name, DelayMs: delayMs, DueMs: due, MsgType: msgType, Payload: payload}
	if i := f.reminder(r.Actor, name); i >= 0 {
		f.Reminders = slices.Delete(f.Reminders, i, i+1)
	}
	f.Reminders = append(f.Reminders, r)
	return nil
}

// CancelReminder implements sluice.Backend: removes the running actor's pending reminder
// name, true when there was one ("" names none).
func (f *Fake) CancelReminder(name string) (bool, error) {
	if err := f.record(Call{Op: "cancel_reminder", Name: name}); err != nil {
		return false, err
	}
	i := f.reminder(f.sender(), name)
	if i < 0 {
		return false, nil
	}
	f.Reminders = slices.Delete(f.Reminders, i, i+1)
	return true, nil
}

// reminder is the index in Reminders of actor's pending reminder name, -1 when there is none
// or name is "" (an unnamed reminder has no name to find it by).
func (f *Fake) reminder(actor, name string) int {
	if name == "" {
		return -1
	}
	return slices.IndexFunc(f.Reminders, func(r Reminder) bool { return r.Actor == actor && r.Name == name })
}

// Publish implements sluice.Backend.
func (f *Fake) Publish(topic string, payload []byte) error {
	return f.record(Call{Op: "publish", To: topic, Payload: payload})
}
