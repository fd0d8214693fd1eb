// Package export_sluice_actor_batch is the hand-written half of the WIT `batch` export (batched
// turns): the generated wit_exports package calls Run here, and package sluice installs the
// hook at start-up (this package must not import sluice: that would be an import cycle).
package export_sluice_actor_batch

// RunHook is set by package sluice's init.
var RunHook func()

// Run implements `run` of sluice:actor/batch.
func Run() {
	RunHook()
}
