// Package sluice is the Go guest SDK of Sluice: register an Actor, call the host through
// package sluice.dev/guest/host, and match errors with errors.Is/As.
//
//	func init() { sluice.Register(&Echo{}) }
//	func main() {}
package sluice

import (
	"context"
	"fmt"
)

var registered Actor

// Register installs the actor. Call it from an init function: a component built with
// -buildmode=c-shared runs package initialisers but never main.
func Register(a Actor) { registered = a }

// HandlerFunc adapts a function to an Actor with a no-op Init.
type HandlerFunc func(ctx context.Context, env *Envelope) ([]byte, error)

// Init does nothing.
func (HandlerFunc) Init(string) error { return nil }

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, env *Envelope) ([]byte, error) {
	return f(ctx, env)
}

// CallInit runs the registered actor's Init (used by the component glue).
func CallInit(config string) *Error {
	if registered == nil {
		return Errorf(CodeInternal, "no actor registered: call sluice.Register in an init function")
	}
	if err := registered.Init(config); err != nil {
		return AsError(err)
	}
	return nil
}

// CallHandle runs one turn of the registered actor with the turn's context (the component
// glue builds it with TurnContext). A returned error becomes the guest error the caller sees
// (a plain error becomes internal, "INTERNAL: " + its message, and the instance keeps its
// state); a panic is not recovered and traps the instance.
func CallHandle(ctx context.Context, env *Envelope) ([]byte, *Error) {
	if registered == nil {
		return nil, Errorf(CodeInternal, "no actor registered: call sluice.Register in an init function")
	}
	out, err := registered.Handle(ctx, env)
	if err != nil {
		return nil, AsError(err)
	}
	return out, nil
}

// Reply converts a reply value like ToBytes, for handlers that build JSON replies:
// return sluice.Reply(map[string]any{"ok": true}).
func Reply(v any) ([]byte, error) {
	b, err := ToBytes(v)
	if err != nil {
		return nil, fmt.Errorf("reply: %w", err)
	}
	return b, nil
}
