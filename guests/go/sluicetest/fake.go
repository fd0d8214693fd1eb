// Package sluicetest is a fake Sluice host for unit-testing Go actors and the SDK: install it
// with sluice.SetBackend(fake), run turns with fake.Handle, and script its failures.
//
//	fake := sluicetest.New()
//	sluice.SetBackend(fake)
//	fake.AskReply = []byte(`{"done":true}`)
//	out, err := fake.Handle(&myActor{}, &sluice.Envelope{MsgType: "forward", Payload: []byte(`{"job":1}`)})
//	// fake.Calls[0]: Op "ask", To "Worker/1", TimeoutMs as the actor's context gave it
//
// Its defaults are those of the Python, TypeScript and Rust fakes: SelfID "MyActor/1", NowMs
// 1000, Ask answers "{}", Tell is sluice.Queued, TellReliable goes sluice.Direct, and
// Dispatch accepts every target unless Result says otherwise.
package sluicetest

import (
	"time"

	sluice "sluice.dev/guest"
)

// Call is one recorded fallible host call, as the host received it.
type Call struct {
	// Op is the import: "tell", "ask", "schedule", "dispatch", "tell_reliable", "publish".
	Op string
	// To is the target actor id; the topic for "publish"; "" for "schedule" and "dispatch".
	To      string
	MsgType string
	Payload []byte
	// TimeoutMs is the timeout an "ask" was sent with: what was left of its context's
	// deadline, or sluice.DefaultAskTimeoutMs without one.
	TimeoutMs uint64
	// DelayMs is the delay of a "schedule".
	DelayMs uint64
	// Req is the request of a "dispatch", exactly as sent.
	Req *sluice.DispatchRequest
}

// Fake records calls (Calls, Logs) and answers them from its fields, which a test may change
// at any time. FailWith makes the next fallible call fail with that error (it is recorded
// all the same). A call refused before sending (a done context, an invalid mode) never
// reaches the fake, so it records nothing.
type Fake struct {
	Calls    []Call
	Logs     []string // "level: message" per Log
	FailWith *sluice.Error
	Self     string // SelfID
	Now      uint64 // NowMs
	AskReply []byte
	Receipt  sluice.Receipt      // what Tell returns
	Path     sluice.DeliveryPath // where TellReliable says the message went
	// Result is what Dispatch returns; nil: every target accepted, none rejected.
	Result *sluice.DispatchResult
}

// New returns a fake with the defaults every SDK's fake shares (see the package doc).
func New() *Fake {
	return &Fake{
		Self: "MyActor/1", Now: 1000, AskReply: []byte("{}"),
		Receipt: sluice.Queued, Path: sluice.Direct,
	}
}

// Handle delivers env to a as a host does and returns what the caller would get: a.Handle
// runs with the turn's context (sluice.TurnContext: env.DeadlineMs from now when
// env.HasDeadline), and an error comes back as the *sluice.Error the caller would see (a
// plain error becomes INTERNAL). Calling a.Handle directly with a context of the test's
// choosing works too.
func (f *Fake) Handle(a sluice.Actor, env *sluice.Envelope) ([]byte, error) {
	out, err := a.Handle(sluice.TurnContext(env, time.Now()), env)
	if err != nil {
		return nil, sluice.AsError(err)
	}
	return out, nil
}

func (f *Fake) record(c Call) error {
	f.Calls = append(f.Calls, c)
	if e := f.FailWith; e != nil {
		f.FailWith = nil
		return e
	}
	return nil
}

// Tell implements sluice.Backend.
func (f *Fake) Tell(to, msgType string, payload []byte) (sluice.Receipt, error) {
	if err := f.record(Call{Op: "tell", To: to, MsgType: msgType, Payload: payload}); err != nil {
		return "", err
	}
	return f.Receipt, nil
}

// Ask implements sluice.Backend.
func (f *Fake) Ask(to, msgType string, payload []byte, timeoutMs uint64) ([]byte, error) {
	if err := f.record(Call{Op: "ask", To: to, MsgType: msgType, Payload: payload, TimeoutMs: timeoutMs}); err != nil {
		return nil, err
	}
	return f.AskReply, nil
}

// Schedule implements sluice.Backend.
func (f *Fake) Schedule(delayMs uint64, msgType string, payload []byte) error {
	return f.record(Call{Op: "schedule", MsgType: msgType, Payload: payload, DelayMs: delayMs})
}

// SelfID implements sluice.Backend.
func (f *Fake) SelfID() string { return f.Self }

// NowMs implements sluice.Backend.
func (f *Fake) NowMs() uint64 { return f.Now }

// Log implements sluice.Backend.
func (f *Fake) Log(level sluice.Level, msg string) { f.Logs = append(f.Logs, string(level)+": "+msg) }

// Dispatch implements sluice.Backend.
func (f *Fake) Dispatch(req sluice.DispatchRequest) (sluice.DispatchResult, error) {
	if err := f.record(Call{Op: "dispatch", MsgType: req.MsgType, Payload: req.Payload, Req: &req}); err != nil {
		return sluice.DispatchResult{}, err
	}
	if f.Result != nil {
		return *f.Result, nil
	}
	return sluice.DispatchResult{Accepted: uint32(len(req.Targets))}, nil
}

// TellReliable implements sluice.Backend.
func (f *Fake) TellReliable(to, msgType string, payload []byte) (sluice.DeliveryPath, error) {
	if err := f.record(Call{Op: "tell_reliable", To: to, MsgType: msgType, Payload: payload}); err != nil {
		return "", err
	}
	return f.Path, nil
}

// Publish implements sluice.Backend.
func (f *Fake) Publish(topic string, payload []byte) error {
	return f.record(Call{Op: "publish", To: topic, Payload: payload})
}
