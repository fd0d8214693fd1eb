package runtime

import (
	"fmt"
	"runtime"
	"unsafe"
)

type Handle struct {
	value int32
}

func (h *Handle) Use() int32 {
	if h.value == 0 {
		panic("nil handle")
	}
	return h.value
}

func (h *Handle) Take() int32 {
	if h.value == 0 {
		panic("nil handle")
	}
	value := h.value
	h.value = 0
	return value
}

func (h *Handle) Set(value int32) {
	if value == 0 {
		panic("nil handle")
	}
	if h.value != 0 {
		panic("handle already set")
	}
	h.value = value
}

func (h *Handle) TakeOrNil() int32 {
	value := h.value
	h.value = 0
	return value
}

func MakeHandle(value int32) *Handle {
	if value == 0 {
		panic("nil handle")
	}
	return &Handle{value}
}

func Allocate(pinner *runtime.Pinner, size, align uintptr) unsafe.Pointer {
	pointer := allocateRaw(size, align)
	if pinner == &pinner_ {
		// Sluice patch: what `cabi_realloc` allocates for the host is kept reachable from
		// `held` until `Unpin`, not pinned; see `held`.
		if pointer != nil {
			held = append(held, pointer)
		}
		return pointer
	}
	pinner.Pin(pointer)
	return pointer
}

func allocateRaw(size, align uintptr) unsafe.Pointer {
	if size == 0 {
		return nil
	}

	if size%align != 0 {
		panic(fmt.Sprintf("size %v is not compatible with alignment %v", size, align))
	}

	switch align {
	case 1:
		return unsafe.Pointer(unsafe.SliceData(make([]uint8, size)))
	case 2:
		return unsafe.Pointer(unsafe.SliceData(make([]uint16, size/align)))
	case 4:
		return unsafe.Pointer(unsafe.SliceData(make([]uint32, size/align)))
	case 8:
		return unsafe.Pointer(unsafe.SliceData(make([]uint64, size/align)))
	default:
		panic(fmt.Sprintf("unsupported alignment: %v", align))
	}
}

// NB: `cabi_realloc` may be called before the Go runtime has been initialized,
// in which case we need to use `runtime.sbrk` to do allocations.  The following
// is an abbreviation of [Till's
// efforts](https://github.com/bytecodealliance/go-modules/pull/367).

//go:linkname sbrk runtime.sbrk
func sbrk(n uintptr) unsafe.Pointer

// Sluice patch: pin the current P while allocating inside `cabi_realloc`. The host calls
// `cabi_realloc` while it lowers arguments or an `ask` reply into the guest; if that allocation
// starts a GC cycle, the GC's background work calls WASI clocks/poll, and any import call
// during a canonical-ABI realloc is forbidden ("cannot leave component instance"), which trapped
// stock v0.4.0 after ~45-60k calls. With the P pinned the allocation cannot be preempted and
// the GC assist runs without scheduling (1M echo + 300k ask + 300k tell measured with no trap).

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

//nolint:unused
var useGCAllocations = false

func init() {
	useGCAllocations = true
}

//nolint:unused
func offset(ptr, align uintptr) uintptr {
	newptr := (ptr + align - 1) &^ (align - 1)
	return newptr - ptr
}

// pinner_ marks the allocations `cabi_realloc` makes; `Allocate` holds them in `held`.
var pinner_ = runtime.Pinner{}

// Sluice patch: `held` keeps what the host lowered into this instance (an export's arguments,
// an import's results) reachable until the next `Unpin`. Upstream pins each allocation with a
// `runtime.Pinner` instead. Go's heap does not move objects, so reachability is all the host's
// pointers need, and pinning cost a span lock and a special record per allocation: 3-4 per
// message, and a quarter of a Go actor's turn (`perf` of the polyglot bench's echo, 2026-12-07).
// The slice keeps its capacity from turn to turn.
var held []unsafe.Pointer

func Unpin() {
	clear(held)
	held = held[:0]
}

//nolint:unused
//go:wasmimport wasi_snapshot_preview1 adapter_monotonic_clock_set_paused
func adapterMonotonicClockSetPaused(paused bool)

//nolint:unused
//go:wasmexport cabi_realloc
func cabiRealloc(oldPointer unsafe.Pointer, oldSize, align, newSize uintptr) unsafe.Pointer {
	if oldPointer != nil || oldSize != 0 {
		panic("todo")
	}

	if useGCAllocations {
		// Here we call `adapter_monotonic_clock_set_paused` before and
		// after allocating since the Go garbage collector calls
		// `clock_time_get` to measure time spent in various stages of
		// GC, but calls to imports from `cabi_realloc` are forbidden by
		// the component model, so we must tell the
		// `wasi_snapshot_preview1` adapter to use a cached value
		// instead of calling `monotonic_clock::now`.
		//
		// See https://github.com/bytecodealliance/wasmtime/pull/13563
		// for more details.
		adapterMonotonicClockSetPaused(true)
		procPin()
		pointer := Allocate(&pinner_, newSize, align)
		procUnpin()
		adapterMonotonicClockSetPaused(false)
		return pointer
	} else {
		alignedSize := newSize + offset(newSize, align)
		unaligned := sbrk(alignedSize)
		off := offset(uintptr(unaligned), align)
		return unsafe.Add(unaligned, off)
	}
}
