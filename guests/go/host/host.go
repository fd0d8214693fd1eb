// Package host is how a Go actor talks to its Sluice host: messaging, clocks, the durable
// outbox and the bus. Every fallible call returns a *sluice.Error (match it with errors.Is
// against sluice.ErrResourceExhausted etc., or errors.As for the details).
//
// Every call that sends takes a context first: Handle's ctx, or a child of it. A call whose
// context is already done returns a DEADLINE_EXCEEDED *sluice.Error without sending, and Ask
// waits at most until the context's deadline. SelfID, NowMs, Log and Logf send nothing and
// take no context.
package host

import (
	"context"
	"fmt"
	"time"

	sluice "sluice.dev/guest"
)

// Tell sends fire-and-forget. payload may be []byte, string or anything JSON-able. The host
// gives the message the turn's deadline; ctx is checked before sending (a done ctx is a
// DEADLINE_EXCEEDED error, see sluice.ContextError) but a tighter deadline of its own does
// not travel with the message.
func Tell(ctx context.Context, to, msgType string, payload any) (sluice.Receipt, error) {
	b, err := bytesFor(ctx, payload)
	if err != nil {
		return "", err
	}
	return sluice.CurrentBackend().Tell(to, msgType, b)
}

// Ask sends a request and waits for the reply until ctx's deadline: the host gets the time
// left, rounded up to whole milliseconds, or sluice.DefaultAskTimeoutMs when ctx has none.
// The host also keeps the turn's own deadline, so a deadline only ever tightens. To bound one
// call:
//
//	ctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
//	defer cancel()
//	reply, err := host.Ask(ctx, worker, "process", job)
//
// A done ctx (an expired deadline, a cancelled context) is a DEADLINE_EXCEEDED error before
// anything is sent; see sluice.ContextError.
func Ask(ctx context.Context, to, msgType string, payload any) ([]byte, error) {
	b, err := bytesFor(ctx, payload)
	if err != nil {
		return nil, err
	}
	return sluice.CurrentBackend().Ask(to, msgType, b, timeoutMs(ctx))
}

// timeoutMs is what Ask sends as its timeout: timeoutAt(ctx, time.Now()).
func timeoutMs(ctx context.Context) uint64 { return timeoutAt(ctx, time.Now()) }

// timeoutAt is what is left of ctx's deadline at now in whole milliseconds, rounded up (a
// call never gets less than its context allows) and at least 1, or
// sluice.DefaultAskTimeoutMs when ctx has no deadline.
func timeoutAt(ctx context.Context, now time.Time) uint64 {
	d, ok := ctx.Deadline()
	if !ok {
		return sluice.DefaultAskTimeoutMs
	}
	ms := (d.Sub(now) + time.Millisecond - 1) / time.Millisecond
	return uint64(max(ms, 1))
}

// bytesFor is the payload as bytes (sluice.ToBytes), or the error a done ctx is.
func bytesFor(ctx context.Context, payload any) ([]byte, error) {
	if e := sluice.ContextError(ctx); e != nil {
		return nil, e
	}
	return sluice.ToBytes(payload)
}

// Schedule delivers msgType with payload to this actor itself after delayMs. A done ctx is
// a DEADLINE_EXCEEDED error before anything is sent.
func Schedule(ctx context.Context, delayMs uint64, msgType string, payload any) error {
	b, err := bytesFor(ctx, payload)
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
func Logf(format string, args ...any) { Log(sluice.LevelInfo, fmt.Sprintf(format, args...)) }

// OutboxAPI is the durable outbox; get it with Outbox().
type OutboxAPI struct{}

// BusAPI is pub/sub between actors; get it with Bus().
type BusAPI struct{}

// Outbox returns the durable outbox.
func Outbox() OutboxAPI { return OutboxAPI{} }

// Bus returns the pub/sub bus.
func Bus() BusAPI { return BusAPI{} }

// DispatchWithTargets durably fans payload out to targets (the seed's call shape).
// dispatchContext is the request's context string (tenant, namespace; WIT
// `dispatch-request.context`), mode sluice.ModeCast or sluice.ModeCall, conflict
// sluice.ConflictAppend or sluice.ConflictOverwrite (the zero values are cast and append),
// idemKey "" = no key. Receivers see msg-type sluice.DefaultDispatchMsgType; use Dispatch for
// a different one or for sequence numbers and TTLs. A done ctx is a DEADLINE_EXCEEDED error
// before anything is sent.
func (o OutboxAPI) DispatchWithTargets(ctx context.Context, dispatchContext, dispatcherID string,
	targets []string, payload any, mode sluice.DispatchMode, idemKey string,
	conflict sluice.Conflict) (*sluice.DispatchResult, error) {
	b, err := bytesFor(ctx, payload)
	if err != nil {
		return nil, err
	}
	return o.Dispatch(ctx, sluice.DispatchRequest{
		Context: dispatchContext, DispatcherID: dispatcherID, MsgType: sluice.DefaultDispatchMsgType,
		Targets: targets, Payload: b, Mode: mode, IdempotencyKey: idemKey, Conflict: conflict,
	})
}

// Dispatch sends a full dispatch request ("" msg-type = sluice.DefaultDispatchMsgType). A
// mode or conflict out of range is an INVALID_ARGUMENT error, and a done ctx a
// DEADLINE_EXCEEDED one, before anything is sent.
func (OutboxAPI) Dispatch(ctx context.Context, req sluice.DispatchRequest) (*sluice.DispatchResult, error) {
	if e := sluice.ContextError(ctx); e != nil {
		return nil, e
	}
	if req.MsgType == "" {
		req.MsgType = sluice.DefaultDispatchMsgType
	}
	if !req.Mode.Valid() {
		return nil, sluice.Errorf(sluice.CodeInvalidArgument, "unknown dispatch mode %d", uint8(req.Mode))
	}
	if !req.Conflict.Valid() {
		return nil, sluice.Errorf(sluice.CodeInvalidArgument, "unknown conflict policy %d", uint8(req.Conflict))
	}
	res, err := sluice.CurrentBackend().Dispatch(req)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// TellReliable tells directly and falls back to the outbox on any failure. A done ctx is a
// DEADLINE_EXCEEDED error before anything is sent.
func (OutboxAPI) TellReliable(ctx context.Context, to, msgType string, payload any) (sluice.DeliveryPath, error) {
	b, err := bytesFor(ctx, payload)
	if err != nil {
		return "", err
	}
	return sluice.CurrentBackend().TellReliable(to, msgType, b)
}

// Remind arms a durable reminder: msgType with payload, delivered to this actor itself (with
// its own id as the sender) once delayMs has passed. Unlike Schedule, which is in memory and
// lost with the host, the outbox stores it before Remind returns: it outlives the activation,
// a host crash or restart and a handoff. It arrives at least once (after a crash it may arrive
// twice), so handle it idempotently. A non-empty name (at most 256 bytes) names it for this
// actor, and arming that name again replaces the pending one; "" arms a new one each time.
// The host fails it INVALID_ARGUMENT (a bad msgType, a payload over the limit, a name over
// 256 bytes), RESOURCE_EXHAUSTED (max_reminders_per_actor already pending) or UNAVAILABLE (a
// host without an outbox). A done ctx is a DEADLINE_EXCEEDED error before anything is sent.
func (OutboxAPI) Remind(ctx context.Context, name string, delayMs uint64, msgType string, payload any) error {
	b, err := bytesFor(ctx, payload)
	if err != nil {
		return err
	}
	return sluice.CurrentBackend().Remind(name, delayMs, msgType, b)
}

// CancelReminder cancels this actor's pending reminder name: true when one was pending, false
// when none was (it was never armed, was cancelled already, or is being delivered). A done ctx
// is a DEADLINE_EXCEEDED error before anything is sent.
func (OutboxAPI) CancelReminder(ctx context.Context, name string) (bool, error) {
	if e := sluice.ContextError(ctx); e != nil {
		return false, e
	}
	return sluice.CurrentBackend().CancelReminder(name)
}

// Publish publishes payload on topic ("a.b.c"). A done ctx is a DEADLINE_EXCEEDED error
// before anything is sent.
func (BusAPI) Publish(ctx context.Context, topic string, payload any) error {
	b, err := bytesFor(ctx, payload)
	if err != nil {
		return err
	}
	return sluice.CurrentBackend().Publish(topic, b)
}
