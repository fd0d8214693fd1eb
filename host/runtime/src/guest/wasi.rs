//! The WASI a guest gets: nothing inherited unless the app config grants it.

use wasmtime_wasi::WasiCtx;

use crate::config::WasiGrants;
use crate::id::ActorId;

/// What a guest may touch: nothing is inherited unless granted (no stdio, env, args,
/// preopens or network).
pub(crate) fn build_wasi(grants: &WasiGrants, id: &ActorId) -> WasiCtx {
    let mut b = WasiCtx::builder();
    b.allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if grants.stdio {
        b.inherit_stdout().inherit_stderr();
    }
    for (k, v) in &grants.env {
        b.env(k, v);
    }
    for (guest, hostdir) in &grants.dirs {
        if let Err(e) = b.preopened_dir(hostdir, guest, wasmtime_wasi::FsPerms::ReadOnly) {
            tracing::warn!(actor = %id, dir = %hostdir.display(), error = %e, "cannot preopen granted dir");
        }
    }
    b.build()
}
