//! The host: the wiring of a running host ([`inner`]) and its public face ([`Host`]).

mod api;
mod call;
mod deploy;
mod here;
mod inner;
mod services;
mod status;

pub use api::Host;
pub use call::Call;
pub use deploy::Deployed;
pub use here::ReplyWait;
pub use status::TypeStatus;
