// Package host is how a Go actor talks to its Sluice host: messaging, clocks, the durable
// outbox and the bus. Every fallible call returns a *sluice.Error (match it with errors.Is
// against sluice.ErrResourceExhausted etc., or errors.As for the details).
package host

import (
	"time"

	sluice "sluice.dev/guest"
)

// Tell sends fire-and-forget. payload may be []byte, string or anything JSON-able.
func Tell(to, msgType string, payload any) (sluice.Receipt, error) {
	b, err := sluice.ToBytes(payload)
	if err != nil {
		return "", err
	}
	return sluice.CurrentBackend().Tell(to, msgType, b)
}

// Ask sends a request and waits for the reply, at most timeoutMs (0 = the SDK default).
func Ask(to, msgType string, payload any, timeoutMs uint64) ([]byte, error) {
	b, err := sluice.ToBytes(payload)
	if err != nil {
		return nil, err
	}
	if timeoutMs == 0 {
		timeoutMs = sluice.DefaultAskTimeoutMs
	}
	return sluice.CurrentBackend().Ask(to, msgType, b, timeoutMs)
}

// Call makes calls with a per-call deadline; see WithDeadline.
type Call struct {
	timeoutMs uint64
	err       error
}

// WithDeadline returns calls bounded by d, which only tightens the inherited deadline (the
// host keeps the earlier of the turn's own and now + d):
//
//	reply, err := host.WithDeadline(250 * time.Millisecond).Ask(worker, "process", job)
//
// d must be positive; otherwise every call through the result fails with an
// INVALID_ARGUMENT error without sending anything. Sub-millisecond parts round up.
func WithDeadline(d time.Duration) Call {
	if d <= 0 {
		return Call{err: sluice.InvalidArgument(sprintf(
			"INVALID_ARGUMENT: deadline must be a positive finite number of milliseconds, got %v", d))}
	}
	return Call{timeoutMs: uint64((d + time.Millisecond - 1) / time.Millisecond)}
}

// Ask is host.Ask within this deadline (and timeoutMs when also given, 0 = none).
func (c Call) Ask(to, msgType string, payload any, timeoutMs uint64) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	ms := c.timeoutMs
	if timeoutMs != 0 && timeoutMs < ms {
		ms = timeoutMs
	}
	return Ask(to, msgType, payload, ms)
}

// Schedule delivers msgType with payload to this actor itself after delayMs.
func Schedule(delayMs uint64, msgType string, payload any) error {
	b, err := sluice.ToBytes(payload)
	if err != nil {
		return err
	}
	return sluice.CurrentBackend().Schedule(delayMs, msgType, b)
}

// SelfID is this actor's id, "Type/key".
func SelfID() string { return sluice.CurrentBackend().SelfID() }

// NowMs is wall-clock milliseconds since the Unix epoch.
func NowMs() uint64 { return sluice.CurrentBackend().NowMs() }

// Log writes msg at level ("trace", "debug", "info", "warn", "error").
func Log(level sluice.Level, msg string) { sluice.CurrentBackend().Log(level, msg) }

// Logf logs a formatted message at info.
func Logf(format string, args ...any) { Log(sluice.LevelInfo, sprintf(format, args...)) }

// OutboxAPI is the durable outbox; get it with Outbox().
type OutboxAPI struct{}

// BusAPI is pub/sub between actors; get it with Bus().
type BusAPI struct{}

// Outbox returns the durable outbox.
func Outbox() OutboxAPI { return OutboxAPI{} }

// Bus returns the pub/sub bus.
func Bus() BusAPI { return BusAPI{} }

// DispatchWithTargets durably fans payload out to targets (the seed's call shape). mode is
// sluice.ModeCast or sluice.ModeCall ("" = cast), conflict sluice.ConflictAppend or
// sluice.ConflictOverwrite ("" = append); the literals "cast", "overwrite", … work too,
// idemKey "" = no key. Receivers see msg-type sluice.DefaultDispatchMsgType; use Dispatch
// for a different one or for sequence numbers and TTLs.
func (OutboxAPI) DispatchWithTargets(ctx, dispatcherID string, targets []string, payload any,
	mode sluice.DispatchMode, idemKey string, conflict sluice.Conflict) (*sluice.DispatchResult, error) {
	b, err := sluice.ToBytes(payload)
	if err != nil {
		return nil, err
	}
	return Outbox().Dispatch(sluice.DispatchRequest{
		Context: ctx, DispatcherID: dispatcherID, MsgType: sluice.DefaultDispatchMsgType,
		Targets: targets, Payload: b, Mode: mode, IdempotencyKey: idemKey, Conflict: conflict,
	})
}

// Dispatch sends a full dispatch request.
func (OutboxAPI) Dispatch(req sluice.DispatchRequest) (*sluice.DispatchResult, error) {
	if req.MsgType == "" {
		req.MsgType = sluice.DefaultDispatchMsgType
	}
	switch req.Mode {
	case "":
		req.Mode = sluice.ModeCast
	case sluice.ModeCast, sluice.ModeCall:
	default:
		return nil, sluice.InvalidArgument("INVALID_ARGUMENT: unknown dispatch mode " + quote(string(req.Mode)))
	}
	switch req.Conflict {
	case "":
		req.Conflict = sluice.ConflictAppend
	case sluice.ConflictAppend, sluice.ConflictOverwrite:
	default:
		return nil, sluice.InvalidArgument("INVALID_ARGUMENT: unknown conflict policy " + quote(string(req.Conflict)))
	}
	res, err := sluice.CurrentBackend().Dispatch(req)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// TellReliable tells directly and falls back to the outbox on any failure.
func (OutboxAPI) TellReliable(to, msgType string, payload any) (sluice.DeliveryPath, error) {
	b, err := sluice.ToBytes(payload)
	if err != nil {
		return "", err
	}
	return sluice.CurrentBackend().TellReliable(to, msgType, b)
}

// Publish publishes payload on topic ("a.b.c").
func (BusAPI) Publish(topic string, payload any) error {
	b, err := sluice.ToBytes(payload)
	if err != nil {
		return err
	}
	return sluice.CurrentBackend().Publish(topic, b)
}
