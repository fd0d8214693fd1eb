package host

import (
	"context"
	"testing"
	"time"

	sluice "sluice.dev/guest"
)

// fixedDeadline is a live context with a deadline.
type fixedDeadline struct{ d time.Time }

func (c fixedDeadline) Deadline() (time.Time, bool) { return c.d, true }
func (c fixedDeadline) Done() <-chan struct{}       { return nil }
func (c fixedDeadline) Err() error                  { return nil }
func (c fixedDeadline) Value(any) any               { return nil }

func TestAskTimeoutIsWhatIsLeftRoundedUpAndAtLeastOneMillisecond(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		left time.Duration
		want uint64
	}{
		{50 * time.Millisecond, 50},
		{1500 * time.Microsecond, 2}, // never 1: that would cut the call short
		{time.Nanosecond, 1},
		{0, 1}, // host calls refuse a done context before they get here; still never 0
		{time.Hour, 3_600_000},
	} {
		if got := timeoutAt(fixedDeadline{now.Add(c.left)}, now); got != c.want {
			t.Errorf("%v left: %d ms, want %d", c.left, got, c.want)
		}
	}
	if got := timeoutAt(context.Background(), now); got != sluice.DefaultAskTimeoutMs {
		t.Errorf("no deadline: %d", got)
	}
}
