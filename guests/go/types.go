package sluice

import (
	"encoding/json"
	"fmt"
)

// Envelope is one message as the actor receives it.
type Envelope struct {
	// Sender is the sending actor's id ("Type/key"), or "" for an external caller or the host.
	Sender string
	// HasSender distinguishes "no sender" from an empty id.
	HasSender bool
	MsgType   string
	Payload   []byte
	// Principal is who the work is done for ("system" when nobody said).
	Principal string
	// DeadlineMs is the time left of the call's deadline when the turn started; valid only
	// when HasDeadline is true.
	DeadlineMs  uint64
	HasDeadline bool
}

// Text is the payload as a string.
func (e *Envelope) Text() string { return string(e.Payload) }

// JSON unmarshals the payload into v.
func (e *Envelope) JSON(v any) error { return json.Unmarshal(e.Payload, v) }

// Actor is what a guest implements. Handle's error becomes a guest error (never a trap);
// a panic traps the instance and its supervisor restarts it.
type Actor interface {
	Init(config string) error
	Handle(env *Envelope) ([]byte, error)
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
type DispatchMode string

// The dispatch modes.
const (
	// ModeCast: delivered once it is in the receiver's mailbox (fire and forget).
	ModeCast DispatchMode = "cast"
	// ModeCall: delivered once the receiver's handler returned success; errors are retried.
	ModeCall DispatchMode = "call"
)

// Conflict is the WIT `conflict`: what a repeated idempotency key means.
type Conflict string

// The conflict policies.
const (
	// ConflictAppend: a repeated key is a duplicate and is stored once.
	ConflictAppend Conflict = "append"
	// ConflictOverwrite: last write wins; the pending message with the same key is replaced.
	ConflictOverwrite Conflict = "overwrite"
)

// DispatchRequest is a durable fan-out request (WIT `dispatch-request`).
type DispatchRequest struct {
	Context        string
	DispatcherID   string
	MsgType        string
	Targets        []string
	Payload        []byte
	Mode           DispatchMode // ModeCast (default, also "") or ModeCall
	IdempotencyKey string       // "" = no key
	Conflict       Conflict     // ConflictAppend (default, also "") or ConflictOverwrite
	SequenceNumber *uint64
	TTLMs          *uint64
}

// DispatchResult: Accepted = delivered now; Rejected = left in the outbox for the relay.
type DispatchResult struct {
	Accepted uint32
	Rejected uint32
}

// DefaultDispatchMsgType is the msg-type receivers see when a dispatch names none.
const DefaultDispatchMsgType = "dispatch"

// DefaultAskTimeoutMs is the ask deadline when the caller gives 0.
const DefaultAskTimeoutMs = 5000

// Backend is the host as the SDK sees it: the WIT imports inside a component, a fake in
// unit tests. Errors it returns are *Error.
type Backend interface {
	Tell(to, msgType string, payload []byte) (Receipt, error)
	Ask(to, msgType string, payload []byte, timeoutMs uint64) ([]byte, error)
	Schedule(delayMs uint64, msgType string, payload []byte) error
	SelfID() string
	NowMs() uint64
	Log(level Level, msg string)
	Dispatch(req DispatchRequest) (DispatchResult, error)
	TellReliable(to, msgType string, payload []byte) (DeliveryPath, error)
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
