// `sqlx::migrate!` embeds the migration files at compile time, and stable Rust does not tell
// cargo about them: without this, a new migration file is not picked up until some source file
// of the crate changes.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
