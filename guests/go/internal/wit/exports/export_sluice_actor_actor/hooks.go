// Package export_sluice_actor_actor is the hand-written half of the WIT `actor` export: the
// generated wit_exports package calls Init and Handle here, and package sluice installs the
// hooks at start-up (this package must not import sluice: that would be an import cycle).
package export_sluice_actor_actor

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"

	"sluice.dev/guest/internal/wit/imports/sluice_actor_types"
)

// InitHook and HandleHook are set by package sluice's init.
var (
	InitHook   func(config string) witTypes.Result[witTypes.Unit, sluice_actor_types.ActorError]
	HandleHook func(env sluice_actor_types.Envelope) witTypes.Result[[]uint8, sluice_actor_types.ActorError]
)

// Init implements `init` of sluice:actor/actor.
func Init(config string) witTypes.Result[witTypes.Unit, sluice_actor_types.ActorError] {
	return InitHook(config)
}

// Handle implements `handle` of sluice:actor/actor.
func Handle(env sluice_actor_types.Envelope) witTypes.Result[[]uint8, sluice_actor_types.ActorError] {
	return HandleHook(env)
}
