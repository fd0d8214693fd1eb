// Package sluicetest is a fake Sluice host for unit-testing Go actors and the SDK:
// install it with sluice.SetBackend(fake) and script its failures.
package sluicetest

import (
	sluice "sluice.dev/guest"
)

// Call is one recorded host call.
type Call struct {
	Op      string
	To      string
	MsgType string
	Payload []byte
	Timeout uint64
	Req     *sluice.DispatchRequest
}

// Fake records calls; FailWith makes the next fallible call fail with that error.
type Fake struct {
	Calls    []Call
	FailWith *sluice.Error
	AskReply []byte
	Self     string
	Now      uint64
	Logs     []string
	Result   sluice.DispatchResult
}

// New returns a fake with sensible defaults.
func New() *Fake {
	return &Fake{AskReply: []byte("pong"), Self: "Echo/1", Now: 1234, Result: sluice.DispatchResult{Accepted: 2, Rejected: 1}}
}

func (f *Fake) fail() error {
	if f.FailWith != nil {
		e := f.FailWith
		f.FailWith = nil
		return e
	}
	return nil
}

// Tell implements sluice.Backend.
func (f *Fake) Tell(to, msgType string, payload []byte) (sluice.Receipt, error) {
	f.Calls = append(f.Calls, Call{Op: "tell", To: to, MsgType: msgType, Payload: payload})
	if err := f.fail(); err != nil {
		return "", err
	}
	return sluice.Queued, nil
}

// Ask implements sluice.Backend.
func (f *Fake) Ask(to, msgType string, payload []byte, timeoutMs uint64) ([]byte, error) {
	f.Calls = append(f.Calls, Call{Op: "ask", To: to, MsgType: msgType, Payload: payload, Timeout: timeoutMs})
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.AskReply, nil
}

// Schedule implements sluice.Backend.
func (f *Fake) Schedule(delayMs uint64, msgType string, payload []byte) error {
	f.Calls = append(f.Calls, Call{Op: "schedule", MsgType: msgType, Payload: payload, Timeout: delayMs})
	return f.fail()
}

// SelfID implements sluice.Backend.
func (f *Fake) SelfID() string { return f.Self }

// NowMs implements sluice.Backend.
func (f *Fake) NowMs() uint64 { return f.Now }

// Log implements sluice.Backend.
func (f *Fake) Log(level sluice.Level, msg string) { f.Logs = append(f.Logs, string(level)+": "+msg) }

// Dispatch implements sluice.Backend.
func (f *Fake) Dispatch(req sluice.DispatchRequest) (sluice.DispatchResult, error) {
	f.Calls = append(f.Calls, Call{Op: "dispatch", Req: &req})
	if err := f.fail(); err != nil {
		return sluice.DispatchResult{}, err
	}
	return f.Result, nil
}

// TellReliable implements sluice.Backend.
func (f *Fake) TellReliable(to, msgType string, payload []byte) (sluice.DeliveryPath, error) {
	f.Calls = append(f.Calls, Call{Op: "tell_reliable", To: to, MsgType: msgType, Payload: payload})
	if err := f.fail(); err != nil {
		return "", err
	}
	return sluice.ViaOutbox, nil
}

// Publish implements sluice.Backend.
func (f *Fake) Publish(topic string, payload []byte) error {
	f.Calls = append(f.Calls, Call{Op: "publish", To: topic, Payload: payload})
	return f.fail()
}
