package sluice

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Envelope is one message as the actor receives it.
type Envelope struct {
	// Sender is the sending actor's id ("Type/key"), or "" for an external caller or the host.
	Sender string
	// HasSender distinguishes "no sender" from an empty id.
	HasSender bool
	// MsgType is the message type the sender chose (1-256 bytes, no control characters).
	MsgType string
	// Payload is the bytes sent (Text and JSON read them).
	Payload []byte
	// Principal is who the work is done for ("system" when nobody said).
	Principal string
	// DeadlineMs is the time left of the call's deadline when the turn started; valid only
	// when HasDeadline is true. Handle's ctx carries it as a deadline (ctx.Deadline()).
	DeadlineMs uint64
	// HasDeadline distinguishes "no deadline" from a deadline of 0 ms.
	HasDeadline bool
}

// Text is the payload as a string.
func (e *Envelope) Text() string { return string(e.Payload) }

// JSON unmarshals the payload into v.
func (e *Envelope) JSON(v any) error { return json.Unmarshal(e.Payload, v) }

// Actor is what a guest implements. Handle's error becomes a guest error (never a trap);
// a panic traps the instance and its supervisor restarts it.
//
// Handle's ctx is the turn's: when env.HasDeadline, ctx.Deadline() is the turn's start plus
// env.DeadlineMs and ctx.Err() becomes context.DeadlineExceeded once the clock passes it
// (checked on each call; ctx.Done() is nil, see TurnContext). Pass it, or a child of it
// (context.WithTimeout), to the host calls: each refuses to send once it is done, and
// host.Ask waits at most until its deadline.
type Actor interface {
	Init(config string) error
	Handle(ctx context.Context, env *Envelope) ([]byte, error)
}

// Receipt is what became of a tell: "queued", "displaced-oldest" or "dropped-newest".
type Receipt string

// Tell receipts.
const (
	Queued          Receipt = "queued"
	DisplacedOldest Receipt = "displaced-oldest"
	DroppedNewest   Receipt = "dropped-newest"
)

// DeliveryPath is how TellReliable delivered: "direct" or "outbox".
type DeliveryPath string

// Delivery paths.
const (
	Direct    DeliveryPath = "direct"
	ViaOutbox DeliveryPath = "outbox"
)

// Level is a log severity.
type Level string

// Log levels.
const (
	LevelTrace Level = "trace"
	LevelDebug Level = "debug"
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
)

// DispatchMode is the WIT `dispatch-mode`: when a dispatched message counts as delivered.
// The zero value is ModeCast, the WIT default. String, MarshalText and UnmarshalText use the
// WIT names ("cast", "call"), so a mode can sit in a JSON config as text.
type DispatchMode uint8

// The dispatch modes, in the WIT order.
const (
	// ModeCast: delivered once it is in the receiver's mailbox (fire and forget).
	ModeCast DispatchMode = iota
	// ModeCall: delivered once the receiver's handler returned success; errors are retried.
	ModeCall
)

var modeNames = [...]string{ModeCast: "cast", ModeCall: "call"}

// String is the WIT name ("cast", "call"), or "DispatchMode(N)" for a value out of range.
func (m DispatchMode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "DispatchMode(" + strconv.Itoa(int(m)) + ")"
}

// Valid reports whether m is one of the WIT cases.
func (m DispatchMode) Valid() bool { return int(m) < len(modeNames) }

// MarshalText is the WIT name; a value out of range is an INVALID_ARGUMENT error.
func (m DispatchMode) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, Errorf(CodeInvalidArgument, "unknown dispatch mode %d", uint8(m))
	}
	return []byte(modeNames[m]), nil
}

// UnmarshalText takes a WIT name ("cast", "call"); anything else is INVALID_ARGUMENT.
func (m *DispatchMode) UnmarshalText(text []byte) error {
	i, err := parseName(modeNames[:], text, "dispatch mode")
	*m = DispatchMode(i)
	return err
}

// Conflict is the WIT `conflict`: what a repeated idempotency key means. The zero value is
// ConflictAppend, the WIT default; the text forms are the WIT names ("append", "overwrite").
type Conflict uint8

// The conflict policies, in the WIT order.
const (
	// ConflictAppend: a repeated key is a duplicate and is stored once.
	ConflictAppend Conflict = iota
	// ConflictOverwrite: last write wins; the pending message with the same key is replaced.
	ConflictOverwrite
)

var conflictNames = [...]string{ConflictAppend: "append", ConflictOverwrite: "overwrite"}

// String is the WIT name ("append", "overwrite"), or "Conflict(N)" for a value out of range.
func (c Conflict) String() string {
	if int(c) < len(conflictNames) {
		return conflictNames[c]
	}
	return "Conflict(" + strconv.Itoa(int(c)) + ")"
}

// Valid reports whether c is one of the WIT cases.
func (c Conflict) Valid() bool { return int(c) < len(conflictNames) }

// MarshalText is the WIT name; a value out of range is an INVALID_ARGUMENT error.
func (c Conflict) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, Errorf(CodeInvalidArgument, "unknown conflict policy %d", uint8(c))
	}
	return []byte(conflictNames[c]), nil
}

// UnmarshalText takes a WIT name ("append", "overwrite"); anything else is INVALID_ARGUMENT.
func (c *Conflict) UnmarshalText(text []byte) error {
	i, err := parseName(conflictNames[:], text, "conflict policy")
	*c = Conflict(i)
	return err
}

// parseName is the index of text in names; on no match it is 0 and an INVALID_ARGUMENT
// error naming what was expected.
func parseName(names []string, text []byte, what string) (int, error) {
	for i, n := range names {
		if string(text) == n {
			return i, nil
		}
	}
	return 0, Errorf(CodeInvalidArgument, "unknown %s %q (want one of %s)", what, text,
		strings.Join(names, ", "))
}

// DispatchRequest is a durable fan-out request (WIT `dispatch-request`).
type DispatchRequest struct {
	Context        string
	DispatcherID   string
	MsgType        string
	Targets        []string
	Payload        []byte
	Mode           DispatchMode // ModeCast (the zero value) or ModeCall
	IdempotencyKey string       // "" = no key
	Conflict       Conflict     // ConflictAppend (the zero value) or ConflictOverwrite
	SequenceNumber *uint64
	TTLMs          *uint64
}

// DispatchOutcome is the WIT `dispatch-outcome`: what Dispatch did with one target. Only
// OutcomeDelivered means the receiver has it now; every Queued outcome is stored and the relay
// delivers it (nothing to resend); NotFound, Expired and DeadLettered targets are in the
// dead-letter queue. String and MarshalText use the WIT names ("not-found").
type DispatchOutcome uint8

// The dispatch outcomes, in the WIT order.
const (
	// OutcomeDelivered: delivered by the immediate attempt (in the mailbox, or handled for a call).
	OutcomeDelivered DispatchOutcome = iota
	// OutcomeDeduplicated: absorbed by its idempotency key; nothing more happens for it.
	OutcomeDeduplicated
	// OutcomeQueuedBehindPending: left for the relay behind an earlier pending message to the
	// same receiver; it follows in order.
	OutcomeQueuedBehindPending
	// OutcomeQueuedAtLimit: left for the relay; its concurrency limit for the receiver's type
	// had no free permit.
	OutcomeQueuedAtLimit
	// OutcomeQueuedRefused: left for the relay; the receiver refused for capacity.
	OutcomeQueuedRefused
	// OutcomeQueuedFailed: left for the relay; the attempt failed in a way that may pass.
	OutcomeQueuedFailed
	// OutcomeQueuedOutOfTime: left for the relay; the turn's deadline passed before or during
	// the attempt.
	OutcomeQueuedOutOfTime
	// OutcomeNotFound: dead-lettered at once; no actor type of the receiver's name.
	OutcomeNotFound
	// OutcomeExpired: dead-lettered at once; its ttl had passed.
	OutcomeExpired
	// OutcomeDeadLettered: dead-lettered at once for another permanent failure.
	OutcomeDeadLettered
)

var outcomeNames = [...]string{
	OutcomeDelivered: "delivered", OutcomeDeduplicated: "deduplicated",
	OutcomeQueuedBehindPending: "queued-behind-pending", OutcomeQueuedAtLimit: "queued-at-limit",
	OutcomeQueuedRefused: "queued-refused", OutcomeQueuedFailed: "queued-failed",
	OutcomeQueuedOutOfTime: "queued-out-of-time", OutcomeNotFound: "not-found",
	OutcomeExpired: "expired", OutcomeDeadLettered: "dead-lettered",
}

// String is the WIT name ("queued-at-limit"), or "DispatchOutcome(N)" for a value out of range.
func (o DispatchOutcome) String() string {
	if o.Valid() {
		return outcomeNames[o]
	}
	return "DispatchOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Valid reports whether o is one of the WIT cases.
func (o DispatchOutcome) Valid() bool { return int(o) < len(outcomeNames) }

// Queued reports whether the target was left in the outbox for the relay.
func (o DispatchOutcome) Queued() bool {
	return o >= OutcomeQueuedBehindPending && o <= OutcomeQueuedOutOfTime
}

// DeadLettered reports whether the target went to the dead-letter queue at once
// (OutcomeNotFound, OutcomeExpired, OutcomeDeadLettered).
func (o DispatchOutcome) DeadLettered() bool {
	return o >= OutcomeNotFound && o <= OutcomeDeadLettered
}

// MarshalText is the WIT name; a value out of range is an INVALID_ARGUMENT error.
func (o DispatchOutcome) MarshalText() ([]byte, error) {
	if !o.Valid() {
		return nil, Errorf(CodeInvalidArgument, "unknown dispatch outcome %d", uint8(o))
	}
	return []byte(outcomeNames[o]), nil
}

// UnmarshalText takes a WIT name ("not-found"); anything else is INVALID_ARGUMENT.
func (o *DispatchOutcome) UnmarshalText(text []byte) error {
	i, err := parseName(outcomeNames[:], text, "dispatch outcome")
	*o = DispatchOutcome(i)
	return err
}

// DispatchResult is what Dispatch did (WIT `dispatch-result`): counts by kind and one
// outcome per target, in the order of the request's Targets. The four counts add up to the
// number of targets.
type DispatchResult struct {
	Delivered    uint32 // delivered by the immediate attempt
	Deduplicated uint32 // absorbed by their idempotency key
	Queued       uint32 // left in the outbox for the relay (every Queued outcome)
	DeadLettered uint32 // dead-lettered at once (NotFound, Expired, DeadLettered)
	Outcomes     []DispatchOutcome
}

// NewDispatchResult is the result with these per-target outcomes and the counts they add up
// to; fakes use it to script a dispatch.
func NewDispatchResult(outcomes ...DispatchOutcome) DispatchResult {
	r := DispatchResult{Outcomes: outcomes}
	for _, o := range outcomes {
		switch {
		case o == OutcomeDelivered:
			r.Delivered++
		case o == OutcomeDeduplicated:
			r.Deduplicated++
		case o.Queued():
			r.Queued++
		case o.DeadLettered():
			r.DeadLettered++
		}
	}
	return r
}

// DefaultDispatchMsgType is the msg-type receivers see when a dispatch names none.
const DefaultDispatchMsgType = "dispatch"

// DefaultAskTimeoutMs is the timeout host.Ask gives the host when its context has no
// deadline (a turn without a deadline, and no context.WithTimeout around the call).
const DefaultAskTimeoutMs = 5000

// Backend is the host as the SDK sees it: the WIT imports inside a component, a fake in
// unit tests. Errors it returns are *Error. It takes no context: package host checks the
// context and turns its deadline into Ask's timeoutMs before it calls the backend.
type Backend interface {
	Tell(to, msgType string, payload []byte) (Receipt, error)
	Ask(to, msgType string, payload []byte, timeoutMs uint64) ([]byte, error)
	Schedule(delayMs uint64, msgType string, payload []byte) error
	SelfID() string
	NowMs() uint64
	Log(level Level, msg string)
	Dispatch(req DispatchRequest) (DispatchResult, error)
	TellReliable(to, msgType string, payload []byte) (DeliveryPath, error)
	Remind(name string, delayMs uint64, msgType string, payload []byte) error
	CancelReminder(name string) (bool, error)
	Publish(topic string, payload []byte) error
}

var backend Backend

// SetBackend installs the host backend. The component glue calls it at start-up; unit
// tests call it with a fake.
func SetBackend(b Backend) { backend = b }

// CurrentBackend returns the installed backend; it panics outside a host without a fake.
func CurrentBackend() Backend {
	if backend == nil {
		panic("sluice: no host backend (not running in a Sluice host; call sluice.SetBackend in tests)")
	}
	return backend
}

// ToBytes converts a payload: []byte as is, string as UTF-8, nil as empty, json.RawMessage
// verbatim, anything else as JSON.
func ToBytes(payload any) ([]byte, error) {
	switch p := payload.(type) {
	case nil:
		return nil, nil
	case []byte:
		return p, nil
	case string:
		return []byte(p), nil
	case json.RawMessage:
		return p, nil
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("INVALID_ARGUMENT: payload is not JSON-able: %v", err)}
		}
		return b, nil
	}
}
