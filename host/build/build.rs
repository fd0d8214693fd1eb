// Empty on purpose: the crate's [build-dependencies] exist only to align build-host features
// with the binary's (see Cargo.toml), and cargo builds them only for a crate with a build script.
fn main() {}
