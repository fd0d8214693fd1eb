package runtime

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// watch returns a flag that a cleanup sets once the GC has freed the object at p.
func watch(p unsafe.Pointer) *atomic.Bool {
	var freed atomic.Bool
	runtime.AddCleanup((*[64]byte)(p), func(f *atomic.Bool) { f.Store(true) }, &freed)
	return &freed
}

// collectedWithin runs the GC until the flag is set or d has passed.
func collectedWithin(freed *atomic.Bool, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); {
		runtime.GC()
		if freed.Load() {
			return true
		}
		time.Sleep(time.Millisecond) // cleanups run on their own goroutine
	}
	return false
}

// What cabi_realloc allocates for the host survives every GC until Unpin, with no reference
// left in Go, and is released by Unpin (no leak across turns).
func TestReallocAllocationsAreHeldUntilUnpin(t *testing.T) {
	p := Allocate(&pinner_, 64, 8)
	freed := watch(p)
	p = nil
	if collectedWithin(freed, 200*time.Millisecond) {
		t.Fatal("a cabi_realloc allocation was collected before Unpin")
	}
	if len(held) == 0 {
		t.Fatal("nothing is held")
	}
	Unpin()
	if len(held) != 0 {
		t.Fatalf("Unpin left %d allocations held", len(held))
	}
	if !collectedWithin(freed, 5*time.Second) {
		t.Fatal("a cabi_realloc allocation was not released by Unpin")
	}
}

// Allocations for any other pinner (an import's return area, the exports' static return
// area) keep upstream's behaviour: pinned by that pinner, untouched by Unpin.
func TestOtherPinnersStillPin(t *testing.T) {
	var static runtime.Pinner
	p := Allocate(&static, 64, 8)
	freed := watch(p)
	p = nil
	Unpin()
	if len(held) != 0 {
		t.Fatal("another pinner's allocation went into held")
	}
	if collectedWithin(freed, 200*time.Millisecond) {
		t.Fatal("a pinned allocation was collected")
	}
	static.Unpin()
	if !collectedWithin(freed, 5*time.Second) {
		t.Fatal("an unpinned allocation was not collected")
	}
}
