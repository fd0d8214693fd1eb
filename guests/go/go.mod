module sluice.dev/guest

go 1.27.1

require go.bytecodealliance.org/pkg v0.4.0

// The patched wit-bindgen runtime (procPin in cabi_realloc); see witpkg/README.md.
replace go.bytecodealliance.org/pkg => ./witpkg
