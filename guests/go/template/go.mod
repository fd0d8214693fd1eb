module example.com/myactor

go 1.27.1

require (
	go.bytecodealliance.org/pkg v0.4.0
	sluice.dev/guest v0.0.0
)

// Point both at your checkout of the Sluice repository (guests/go and guests/go/witpkg).
replace (
	go.bytecodealliance.org/pkg => ../witpkg
	sluice.dev/guest => ..
)
