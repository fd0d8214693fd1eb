package sluice

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Code is the WIT `error-code` case name, e.g. "resource-exhausted".
type Code string

// The WIT error codes.
const (
	CodeResourceExhausted Code = "resource-exhausted"
	CodeDeadlineExceeded  Code = "deadline-exceeded"
	CodeOverloaded        Code = "overloaded"
	CodeNotFound          Code = "not-found"
	CodeInvalidArgument   Code = "invalid-argument"
	CodeUnavailable       Code = "unavailable"
	CodeInternal          Code = "internal"
)

// Codes lists every code in the WIT `error-code` order (the rows of wit/errors.json).
var Codes = []Code{
	CodeResourceExhausted,
	CodeDeadlineExceeded,
	CodeOverloaded,
	CodeNotFound,
	CodeInvalidArgument,
	CodeUnavailable,
	CodeInternal,
}

// Name is the canonical message prefix of the code, e.g. "RESOURCE_EXHAUSTED": every
// message reads "NAME: detail".
func (c Code) Name() string {
	return strings.ToUpper(strings.ReplaceAll(string(c), "-", "_"))
}

// Errorf builds an error whose message takes the canonical form "NAME: detail", e.g.
// sluice.Errorf(sluice.CodeInvalidArgument, "bad amount %d", n).
func Errorf(code Code, format string, args ...any) *Error {
	return NewError(code, code.Name()+": "+fmt.Sprintf(format, args...))
}

// Error is every error that crosses the guest/host boundary. It maps losslessly to and from
// the WIT `actor-error` record. Error() is exactly the canonical message, e.g.
// "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)".
//
// Match a kind with errors.Is(err, sluice.ErrResourceExhausted) and read the details with
// errors.As(err, &e) where e is a *sluice.Error.
type Error struct {
	Code    Code
	Message string
	// RetryAfterMs is set for resource-exhausted refusals that know when to try again.
	RetryAfterMs *uint64
	// Skipped: for deadline-exceeded, true when the queued turn never ran.
	Skipped bool
	// Scope is "actor" or "host" for an overloaded refusal, "" when the error has no
	// overload details; Depth and Limit are meaningful only when Scope is set.
	Scope string
	Depth uint64
	Limit uint64

	// cause is the context error behind a call refused before sending (ContextError); it
	// does not cross the boundary.
	cause error
}

// Error returns the canonical message.
func (e *Error) Error() string { return e.Message }

// Unwrap is the context error (context.DeadlineExceeded or context.Canceled) of a host call
// refused before sending because its context was done, nil for any other error.
func (e *Error) Unwrap() error { return e.cause }

// Is matches the sentinels (ErrResourceExhausted, ...) by code: a sentinel has no message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	if t.Message == "" {
		return t.Code == e.Code
	}
	return t == e
}

// Type is the SDK error class name shared by every SDK ("ResourceExhausted", ...).
func (e *Error) Type() string {
	if n, ok := typeNames[e.Code]; ok {
		return n
	}
	return "Internal"
}

// HasOverload reports whether the error carries overload details (scope, depth, limit).
func (e *Error) HasOverload() bool { return e.Scope != "" }

// Sentinels for errors.Is; they carry no message.
var (
	ErrResourceExhausted = &Error{Code: CodeResourceExhausted}
	ErrDeadlineExceeded  = &Error{Code: CodeDeadlineExceeded}
	ErrOverloaded        = &Error{Code: CodeOverloaded}
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrInvalidArgument   = &Error{Code: CodeInvalidArgument}
	ErrUnavailable       = &Error{Code: CodeUnavailable}
	ErrInternal          = &Error{Code: CodeInternal}
)

var typeNames = map[Code]string{
	CodeResourceExhausted: "ResourceExhausted",
	CodeDeadlineExceeded:  "DeadlineExceeded",
	CodeOverloaded:        "Overloaded",
	CodeNotFound:          "NotFound",
	CodeInvalidArgument:   "InvalidArgument",
	CodeUnavailable:       "Unavailable",
	CodeInternal:          "Internal",
}

// NewError builds an error with a code and the exact message the receiver will see.
func NewError(code Code, message string) *Error { return &Error{Code: code, Message: message} }

// InvalidArgument is a guest error the caller sees as invalid-argument with this message.
func InvalidArgument(message string) *Error { return NewError(CodeInvalidArgument, message) }

// NotFound is a guest error the caller sees as not-found with this message.
func NotFound(message string) *Error { return NewError(CodeNotFound, message) }

// Unavailable is a guest error the caller sees as unavailable with this message.
func Unavailable(message string) *Error { return NewError(CodeUnavailable, message) }

// Internal is a guest error the caller sees as internal with this message.
func Internal(message string) *Error { return NewError(CodeInternal, message) }

// ResourceExhausted is a guest error with an optional retry hint (retryAfterMs < 0: none).
func ResourceExhausted(message string, retryAfterMs int64) *Error {
	e := NewError(CodeResourceExhausted, message)
	if retryAfterMs >= 0 {
		v := uint64(retryAfterMs)
		e.RetryAfterMs = &v
	}
	return e
}

// AsError turns any error into the *Error that crosses the boundary: a *Error (possibly
// wrapped) is kept as is, anything else becomes internal with the message
// "INTERNAL: " + err.Error() (wit/errors.json "uncoded").
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Errorf(CodeInternal, "%s", err.Error())
}

// Report is the error as the TESTKIT error report's "error" object.
func (e *Error) Report() map[string]any {
	var retry, scope, depth, limit any
	if e.RetryAfterMs != nil {
		retry = *e.RetryAfterMs
	}
	if e.Scope != "" {
		scope, depth, limit = e.Scope, e.Depth, e.Limit
	}
	return map[string]any{
		"type": e.Type(), "code": string(e.Code), "message": e.Message,
		"retry_after_ms": retry, "skipped": e.Skipped, "scope": scope, "depth": depth, "limit": limit,
	}
}

// GoString helps debugging: the code and message.
func (e *Error) GoString() string {
	return "&sluice.Error{" + string(e.Code) + ": " + strconv.Quote(e.Message) + "}"
}
