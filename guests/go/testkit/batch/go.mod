module sluice.dev/guest/testkit/batch

go 1.27.1

require (
	go.bytecodealliance.org/pkg v0.4.0
	sluice.dev/guest v0.0.0
)

replace (
	go.bytecodealliance.org/pkg => ../../witpkg
	sluice.dev/guest => ../..
)
