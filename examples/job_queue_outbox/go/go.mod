module sluice.dev/examples/job_queue_outbox

go 1.27.1

require (
	go.bytecodealliance.org/pkg v0.4.0
	sluice.dev/guest v0.0.0
)

replace (
	go.bytecodealliance.org/pkg => ../../../guests/go/witpkg
	sluice.dev/guest => ../../../guests/go
)
