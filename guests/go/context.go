package sluice

// The context of a turn: the deadline the host gave the turn, as a context.Context.

import (
	"context"
	"math"
	"time"
)

// maxDeadlineMs is the longest deadline a time.Duration holds (about 292 years); a longer
// one is clamped to it.
const maxDeadlineMs = math.MaxInt64 / int64(time.Millisecond)

// TurnContext is the context Handle gets for env, whose turn started at start (the glue
// passes the guest's time.Now() when the export call begins).
//
// Without env.HasDeadline it is context.Background(). With it, Deadline() is start plus
// env.DeadlineMs, and Err() is context.DeadlineExceeded once time.Now() has reached that
// deadline: the clock is read on each call to Err. Done() is nil, as for a context that is
// never cancelled: a guest turn is one synchronous export call on a single thread, so
// nothing could close a channel while the handler blocks on it (a select on Done would
// deadlock), and a timer goroutine such as context.WithDeadline starts runs only when the
// handler itself blocks. Check ctx.Err() (or leave it to the host calls, which do) instead.
//
// Children behave: context.WithTimeout(ctx, d) reports the earlier of the two deadlines
// through Deadline(), which is what package host reads, and Value delegates to
// context.Background().
func TurnContext(env *Envelope, start time.Time) context.Context {
	if !env.HasDeadline {
		return context.Background()
	}
	ms := int64(maxDeadlineMs)
	if env.DeadlineMs < uint64(maxDeadlineMs) {
		ms = int64(env.DeadlineMs)
	}
	return &turnContext{deadline: start.Add(time.Duration(ms) * time.Millisecond)}
}

// ContextError is the error a host call returns instead of sending when ctx is already done,
// nil while it is live. Done means ctx.Err() is set, or ctx has a deadline the clock has
// reached (a child of context.WithTimeout reports its expiry only once its timer goroutine
// ran, which inside a turn may be never: the deadline itself is what counts).
//
// Both kinds are CodeDeadlineExceeded, the closest code: an expired deadline is exactly
// that, and a cancelled context (context.Canceled) means the caller gave up waiting, which
// a retry or fallback should treat as it treats a deadline. The message reads
// "DEADLINE_EXCEEDED: context deadline exceeded (not sent)" or "DEADLINE_EXCEEDED: context
// canceled (not sent)", and errors.Is also matches context.DeadlineExceeded or
// context.Canceled.
func ContextError(ctx context.Context) *Error {
	err := ctx.Err()
	if err == nil {
		d, ok := ctx.Deadline()
		if !ok || time.Now().Before(d) {
			return nil
		}
		err = context.DeadlineExceeded
	}
	e := Errorf(CodeDeadlineExceeded, "%v (not sent)", err)
	e.cause = err
	return e
}

// turnContext is a context with a deadline and no cancellation; see TurnContext.
type turnContext struct {
	deadline time.Time
}

func (c *turnContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done is nil: see TurnContext.
func (c *turnContext) Done() <-chan struct{} { return nil }

func (c *turnContext) Err() error {
	if time.Now().Before(c.deadline) {
		return nil
	}
	return context.DeadlineExceeded
}

func (c *turnContext) Value(key any) any { return context.Background().Value(key) }

// String names the context in the form the context package's own contexts use.
func (c *turnContext) String() string {
	return "sluice.TurnContext.WithDeadline(" + c.deadline.String() + ")"
}
