//go:build wasip1

package sluice

// The component glue: inside a component (GOOS=wasip1) the SDK talks to the generated WIT
// bindings. This file is the only place that converts between them and the SDK's types, in
// both directions, losslessly.

import (
	"runtime"
	"time"
	"unsafe"

	witRuntime "go.bytecodealliance.org/pkg/wit/runtime"
	witTypes "go.bytecodealliance.org/pkg/wit/types"

	exp "sluice.dev/guest/internal/wit/exports/export_sluice_actor_actor"
	expb "sluice.dev/guest/internal/wit/exports/export_sluice_actor_batch"
	_ "sluice.dev/guest/internal/wit/exports/wit_exports"      // the //go:wasmexport functions
	_ "sluice.dev/guest/internal/wit/imports/sluice_actor_bus" // wasm_import_publish, by go:linkname
	"sluice.dev/guest/internal/wit/imports/sluice_actor_host"
	"sluice.dev/guest/internal/wit/imports/sluice_actor_outbox"
	"sluice.dev/guest/internal/wit/imports/sluice_actor_turns"
	wt "sluice.dev/guest/internal/wit/imports/sluice_actor_types"
)

func init() {
	SetBackend(witBackend{})
	exp.InitHook = witInit
	exp.HandleHook = witHandle
	expb.RunHook = witRun
}

var codeToWit = map[Code]wt.ErrorCode{
	CodeResourceExhausted: wt.ErrorCode_ResourceExhausted,
	CodeDeadlineExceeded:  wt.ErrorCode_DeadlineExceeded,
	CodeOverloaded:        wt.ErrorCode_Overloaded,
	CodeNotFound:          wt.ErrorCode_NotFound,
	CodeInvalidArgument:   wt.ErrorCode_InvalidArgument,
	CodeUnavailable:       wt.ErrorCode_Unavailable,
	CodeInternal:          wt.ErrorCode_Internal,
}

var witToCode = map[wt.ErrorCode]Code{}

func init() {
	for k, v := range codeToWit {
		witToCode[v] = k
	}
}

// fromWit converts a WIT actor-error into the SDK error. The message is copied: the host
// wrote it into memory the next export call unpins.
func fromWit(e wt.ActorError) *Error {
	code, ok := witToCode[e.Code]
	if !ok {
		code = CodeInternal
	}
	out := &Error{Code: code, Message: string([]byte(e.Message)), Skipped: e.Skipped}
	if e.RetryAfterMs.IsSome() {
		v := e.RetryAfterMs.Some()
		out.RetryAfterMs = &v
	}
	if e.Overload.IsSome() {
		ov := e.Overload.Some()
		out.Scope, out.Depth, out.Limit = "actor", ov.Depth, ov.Limit
		if ov.Scope == wt.OverloadScope_Host {
			out.Scope = "host"
		}
	}
	return out
}

func toWit(e *Error) wt.ActorError {
	code, ok := codeToWit[e.Code]
	if !ok {
		code = wt.ErrorCode_Internal
	}
	out := wt.ActorError{
		Code: code, Message: e.Message, Skipped: e.Skipped,
		RetryAfterMs: witTypes.None[uint64](), Overload: witTypes.None[wt.OverloadInfo](),
	}
	if e.RetryAfterMs != nil {
		out.RetryAfterMs = witTypes.Some(*e.RetryAfterMs)
	}
	if e.Scope != "" {
		scope := wt.OverloadScope_Actor
		if e.Scope == "host" {
			scope = wt.OverloadScope_Host
		}
		out.Overload = witTypes.Some(wt.OverloadInfo{Scope: scope, Depth: e.Depth, Limit: e.Limit})
	}
	return out
}

func witInit(config string) witTypes.Result[witTypes.Unit, wt.ActorError] {
	if err := CallInit(config); err != nil {
		return witTypes.Err[witTypes.Unit](toWit(err))
	}
	return witTypes.Ok[witTypes.Unit, wt.ActorError](witTypes.Unit{})
}

// envelopeOf is the SDK's view of a WIT envelope.
func envelopeOf(env wt.Envelope) *Envelope {
	e := &Envelope{
		MsgType:   env.MsgType,
		Payload:   env.Payload,
		Principal: env.Principal,
	}
	if env.Sender.IsSome() {
		e.Sender, e.HasSender = env.Sender.Some(), true
	}
	if env.DeadlineMs.IsSome() {
		e.DeadlineMs, e.HasDeadline = env.DeadlineMs.Some(), true
	}
	return e
}

func witHandle(env wt.Envelope) witTypes.Result[[]uint8, wt.ActorError] {
	out, err := runTurn(envelopeOf(env))
	if err != nil {
		return witTypes.Err[[]uint8](toWit(err))
	}
	return witTypes.Ok[[]uint8, wt.ActorError](out)
}

// runTurn runs one turn of the registered actor; the reply is never nil.
func runTurn(e *Envelope) ([]byte, *Error) {
	// The turn starts now: e.DeadlineMs is what was left of the deadline when the host
	// started it, so the turn's context ends DeadlineMs after this instant.
	start := time.Now()
	out, err := CallHandle(TurnContext(e, start), e)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// witRun is the WIT `batch` export (batched turns): the host hands over the messages queued
// behind a turn one at a time, and each runs through runTurn as if it came alone; its result
// goes back with the next call, which answers its caller before the next turn starts. A panic
// traps the batch at that turn, as it traps a turn alone; the host requeues the rest.
func witRun() {
	env := nextTurn(nil)
	for {
		// What the host lowered into this instance through cabi_realloc (this envelope, the
		// replies of the last turn's asks) is held until someone unpins it; a handle export
		// does so on entry, and a batch is one export call for many turns, so each turn
		// does it here. The Go values still reference that memory: the GC keeps it alive.
		witRuntime.Unpin()
		if env == nil {
			return
		}
		out, err := runTurn(env)
		if err == nil {
			env = nextTurn(&out)
			continue
		}
		// Rare: the generated binding lowers the error record.
		next := sluice_actor_turns.Next(witTypes.Some(witTypes.Err[[]uint8](toWit(err))))
		env = nil
		if next.IsSome() {
			env = envelopeOf(next.Some())
		}
	}
}

// turns.next without the generated binding's per-call cost. The binding allocates a return
// area and a runtime.Pinner for every call, pins the reply and boxes the envelope's options:
// that made a batched turn dearer than a turn of its own, whose export uses a static return
// area. nextTurn lowers `none` (the first call, reply == nil) or `some(ok(reply))` exactly as
// the binding does, into this one static area, and lifts the envelope the same way (the
// strings and payload are views of the memory the host lowered through cabi_realloc, held
// until the next Unpin); nil is `none`, the end of the batch.

//go:linkname wasmImportNext sluice.dev/guest/internal/wit/imports/sluice_actor_turns.wasm_import_next
func wasmImportNext(arg0 int32, arg1 int32, arg2 uintptr, arg3 uintptr, arg4 uint32, arg5 int32, arg6 int64, arg7 int32, arg8 int32, arg9 int32, arg10 int64, arg11 int64, arg12 uintptr)

// nextArea is `option<envelope>` as the canonical ABI lays it out: 64 bytes, 8-aligned.
var nextArea [8]uint64

func nextTurn(reply *[]byte) *Envelope {
	area := unsafe.Pointer(&nextArea)
	if reply == nil {
		wasmImportNext(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, uintptr(area))
	} else {
		data := *reply
		wasmImportNext(1, 0, uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(uint32(len(data))), 0, 0, 0, 0, 0, 0, 0, 0, uintptr(area))
		// The host read the reply during the call: it must not be collected before.
		runtime.KeepAlive(data)
	}
	if *(*uint8)(area) == 0 {
		return nil
	}
	env := &Envelope{
		MsgType:   stringAt(area, 20),
		Payload:   bytesAt(area, 28),
		Principal: stringAt(area, 36),
	}
	if *(*uint8)(unsafe.Add(area, 8)) != 0 {
		env.Sender, env.HasSender = stringAt(area, 12), true
	}
	if *(*uint8)(unsafe.Add(area, 48)) != 0 {
		env.DeadlineMs, env.HasDeadline = *(*uint64)(unsafe.Add(area, 56)), true
	}
	return env
}

// bytesAt is the list<u8> whose (address, length) pair sits at off in a return area: a view
// of linear memory (its addresses start at 0), not a copy. stringAt is the same for a string.
func bytesAt(area unsafe.Pointer, off uintptr) []byte {
	ptr, n := *(*uint32)(unsafe.Add(area, off)), *(*uint32)(unsafe.Add(area, off+4))
	return unsafe.Slice((*uint8)(unsafe.Add(nil, ptr)), n)
}

func stringAt(area unsafe.Pointer, off uintptr) string {
	ptr, n := *(*uint32)(unsafe.Add(area, off)), *(*uint32)(unsafe.Add(area, off+4))
	return unsafe.String((*uint8)(unsafe.Add(nil, ptr)), n)
}

type witBackend struct{}

var receipts = [...]Receipt{wt.TellReceipt_Queued: Queued, wt.TellReceipt_DisplacedOldest: DisplacedOldest, wt.TellReceipt_DroppedNewest: DroppedNewest}

// Tell, Ask and Publish call their imports themselves, as nextTurn calls `turns.next`: the
// generated bindings allocate a return area and a runtime.Pinner per call and pin every
// argument, which was most of what a tell cost a Go actor. The arguments stay reachable
// through the call (runtime.KeepAlive; Go's heap does not move them, and the host reads them
// before it lowers anything back), and the result is read out of the static callArea before
// anything else is called, so no other goroutine's call can overwrite it first.
func (witBackend) Tell(to, msgType string, payload []byte) (Receipt, error) {
	area := unsafe.Pointer(&callArea)
	wasmImportTell(
		uintptr(unsafe.Pointer(unsafe.StringData(to))), uint32(len(to)),
		uintptr(unsafe.Pointer(unsafe.StringData(msgType))), uint32(len(msgType)),
		uintptr(unsafe.Pointer(unsafe.SliceData(payload))), uint32(len(payload)),
		uintptr(area))
	runtime.KeepAlive(to)
	runtime.KeepAlive(msgType)
	runtime.KeepAlive(payload)
	if *(*uint8)(area) == 0 {
		return receipts[*(*uint8)(unsafe.Add(area, 8))], nil
	}
	a := callArea
	return "", errorAt(&a)
}

func (witBackend) Ask(to, msgType string, payload []byte, timeoutMs uint64) ([]byte, error) {
	area := unsafe.Pointer(&callArea)
	wasmImportAsk(
		uintptr(unsafe.Pointer(unsafe.StringData(to))), uint32(len(to)),
		uintptr(unsafe.Pointer(unsafe.StringData(msgType))), uint32(len(msgType)),
		uintptr(unsafe.Pointer(unsafe.SliceData(payload))), uint32(len(payload)),
		int64(timeoutMs), uintptr(area))
	runtime.KeepAlive(to)
	runtime.KeepAlive(msgType)
	runtime.KeepAlive(payload)
	a := callArea
	if *(*uint8)(unsafe.Pointer(&a)) == 0 {
		// A view of the memory the host lowered the reply into, held until the next Unpin.
		return bytesAt(unsafe.Pointer(&a), 8), nil
	}
	return nil, errorAt(&a)
}

func (witBackend) Publish(topic string, payload []byte) error {
	area := unsafe.Pointer(&callArea)
	wasmImportPublish(
		uintptr(unsafe.Pointer(unsafe.StringData(topic))), uint32(len(topic)),
		uintptr(unsafe.Pointer(unsafe.SliceData(payload))), uint32(len(payload)),
		uintptr(area))
	runtime.KeepAlive(topic)
	runtime.KeepAlive(payload)
	if *(*uint8)(area) == 0 {
		return nil
	}
	a := callArea
	return errorAt(&a)
}

// errorAt is the SDK error of a `result<_, actor-error>` whose error a copy of callArea holds,
// laid out as the canonical ABI lowers it.
func errorAt(a *[10]uint64) *Error {
	area := unsafe.Pointer(a)
	e := wt.ActorError{
		Code:         *(*uint8)(unsafe.Add(area, 8)),
		Message:      stringAt(area, 12),
		RetryAfterMs: witTypes.None[uint64](),
		Skipped:      *(*uint8)(unsafe.Add(area, 40)) != 0,
		Overload:     witTypes.None[wt.OverloadInfo](),
	}
	if *(*uint8)(unsafe.Add(area, 24)) != 0 {
		e.RetryAfterMs = witTypes.Some(*(*uint64)(unsafe.Add(area, 32)))
	}
	if *(*uint8)(unsafe.Add(area, 48)) != 0 {
		e.Overload = witTypes.Some(wt.OverloadInfo{
			Scope: *(*uint8)(unsafe.Add(area, 56)),
			Depth: *(*uint64)(unsafe.Add(area, 64)),
			Limit: *(*uint64)(unsafe.Add(area, 72)),
		})
	}
	return fromWit(e)
}

//go:linkname wasmImportTell sluice.dev/guest/internal/wit/imports/sluice_actor_host.wasm_import_tell
func wasmImportTell(arg0 uintptr, arg1 uint32, arg2 uintptr, arg3 uint32, arg4 uintptr, arg5 uint32, arg6 uintptr)

//go:linkname wasmImportAsk sluice.dev/guest/internal/wit/imports/sluice_actor_host.wasm_import_ask
func wasmImportAsk(arg0 uintptr, arg1 uint32, arg2 uintptr, arg3 uint32, arg4 uintptr, arg5 uint32, arg6 int64, arg7 uintptr)

//go:linkname wasmImportPublish sluice.dev/guest/internal/wit/imports/sluice_actor_bus.wasm_import_publish
func wasmImportPublish(arg0 uintptr, arg1 uint32, arg2 uintptr, arg3 uint32, arg4 uintptr)

// callArea is the return area of those three imports (`result<T, actor-error>`, T at most
// 8 bytes): 80 bytes, 8-aligned, as the generated bindings size it.
var callArea [10]uint64

func (witBackend) Schedule(delayMs uint64, msgType string, payload []byte) error {
	r := sluice_actor_host.Schedule(delayMs, msgType, payload)
	if r.IsErr() {
		return fromWit(r.Err())
	}
	return nil
}

func (witBackend) SelfID() string { return sluice_actor_host.SelfId() }

func (witBackend) NowMs() uint64 { return sluice_actor_host.NowMs() }

var levels = map[Level]wt.LogLevel{
	LevelTrace: wt.LogLevel_Trace, LevelDebug: wt.LogLevel_Debug, LevelInfo: wt.LogLevel_Info,
	LevelWarn: wt.LogLevel_Warn, LevelError: wt.LogLevel_Error,
}

func (witBackend) Log(level Level, msg string) {
	l, ok := levels[level]
	if !ok {
		l = wt.LogLevel_Info
	}
	sluice_actor_host.Log(l, msg)
}

func optU64(p *uint64) witTypes.Option[uint64] {
	if p == nil {
		return witTypes.None[uint64]()
	}
	return witTypes.Some(*p)
}

var (
	modesToWit     = [...]wt.DispatchMode{ModeCast: wt.DispatchMode_Cast, ModeCall: wt.DispatchMode_Call}
	conflictsToWit = [...]wt.Conflict{ConflictAppend: wt.Conflict_Append, ConflictOverwrite: wt.Conflict_Overwrite}
)

func (witBackend) Dispatch(req DispatchRequest) (DispatchResult, error) {
	// host.Outbox().Dispatch validated both; this guards a direct Backend call.
	if !req.Mode.Valid() || !req.Conflict.Valid() {
		return DispatchResult{}, Errorf(CodeInvalidArgument, "unknown dispatch mode %d or conflict policy %d",
			uint8(req.Mode), uint8(req.Conflict))
	}
	mode, conflict := modesToWit[req.Mode], conflictsToWit[req.Conflict]
	targets := req.Targets
	if targets == nil {
		targets = []string{}
	}
	r := sluice_actor_outbox.Dispatch(wt.DispatchRequest{
		Context: req.Context, DispatcherId: req.DispatcherID, MsgType: req.MsgType,
		Targets: targets, Payload: req.Payload, Mode: mode, IdempotencyKey: req.IdempotencyKey,
		Conflict: conflict, SequenceNumber: optU64(req.SequenceNumber), TtlMs: optU64(req.TTLMs),
	})
	if r.IsErr() {
		return DispatchResult{}, fromWit(r.Err())
	}
	res := r.Ok()
	// The WIT enum's cases are DispatchOutcome's, in the same order.
	outcomes := make([]DispatchOutcome, len(res.Outcomes))
	for i, o := range res.Outcomes {
		outcomes[i] = DispatchOutcome(o)
	}
	return DispatchResult{
		Delivered: res.Delivered, Deduplicated: res.Deduplicated, Queued: res.Queued,
		DeadLettered: res.DeadLettered, Outcomes: outcomes,
	}, nil
}

func (witBackend) TellReliable(to, msgType string, payload []byte) (DeliveryPath, error) {
	r := sluice_actor_outbox.TellReliable(to, msgType, payload)
	if r.IsErr() {
		return "", fromWit(r.Err())
	}
	if r.Ok() == wt.DeliveryPath_Outbox {
		return ViaOutbox, nil
	}
	return Direct, nil
}

func (witBackend) Remind(name string, delayMs uint64, msgType string, payload []byte) error {
	r := sluice_actor_outbox.Remind(name, delayMs, msgType, payload)
	if r.IsErr() {
		return fromWit(r.Err())
	}
	return nil
}

func (witBackend) CancelReminder(name string) (bool, error) {
	r := sluice_actor_outbox.CancelReminder(name)
	if r.IsErr() {
		return false, fromWit(r.Err())
	}
	return r.Ok(), nil
}
