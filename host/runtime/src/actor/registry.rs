//! The deployed actor types and, per type, its live activations by key.
//!
//! Both maps are read on every tell and ask, from every worker at once, and written only
//! when a type is deployed or a key is activated or deactivated. They are lock-free maps
//! (`papaya`): a lookup takes no lock and writes no shared cache line, so two producers
//! telling into one type do not queue behind each other before they reach the mailbox.

use std::sync::Arc;

use parking_lot::Mutex;

use super::actor_type::ActorType;
use super::cell::{ActorCell, Inbox, InboxState};
use super::module::ModuleVersion;

type Cells = papaya::HashMap<Arc<str>, Arc<ActorCell>>;

/// A deployed type and the map of its activations.
pub(crate) struct TypeEntry {
    pub ty: Arc<ActorType>,
    cells: Cells,
}

impl TypeEntry {
    fn new(ty: ActorType) -> Self {
        Self {
            ty: Arc::new(ty),
            cells: Cells::new(),
        }
    }

    /// The activation of `key`, if there is one.
    pub fn get(&self, key: &str) -> Option<Arc<ActorCell>> {
        self.cells.pin().get(key).cloned()
    }

    /// Adds `cell` under its key unless the key already has one; returns the one that won.
    pub fn insert_new(&self, cell: Arc<ActorCell>) -> Result<Arc<ActorCell>, Arc<ActorCell>> {
        let cells = self.cells.pin();
        let key: Arc<str> = Arc::from(cell.id.key());
        match cells.try_insert(key, cell.clone()) {
            Ok(_) => Ok(cell),
            Err(e) => Err(e.current.clone()),
        }
    }

    /// Every activation (a snapshot).
    pub fn cells(&self) -> Vec<Arc<ActorCell>> {
        self.cells.pin().values().cloned().collect()
    }

    /// How many activations the map holds.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Up to `take` activations, starting `skip` places into the map's order (wrapping).
    pub fn sample(&self, skip: usize, take: usize) -> Vec<Arc<ActorCell>> {
        let cells = self.cells.pin();
        let mut out: Vec<_> = cells.values().skip(skip).take(take).cloned().collect();
        if out.len() < take {
            let wrap = take - out.len();
            out.extend(cells.values().take(wrap.min(skip)).cloned());
        }
        out
    }

    /// Keeps the activations `keep` holds for, in place.
    pub fn retain(&self, keep: impl Fn(&ActorCell) -> bool) {
        self.cells.pin().retain(|_, c| keep(c));
    }

    /// Closes `cell` and takes it out of the map if `idle` holds under its inbox's lock.
    /// Senders that still hold the cell (or find it before it is gone) see it closed and
    /// look the key up again; a sender activating the key meanwhile finds the closed cell in
    /// the map and retries the same way, so at most one open cell per key exists.
    pub fn close_if(&self, cell: &ActorCell, idle: impl Fn(&Inbox) -> bool) -> bool {
        {
            let mut inbox = cell.inbox.lock();
            if inbox.state != InboxState::Open || !idle(&inbox) {
                return false;
            }
            inbox.state = InboxState::Closed;
        }
        self.forget(cell);
        true
    }

    /// Takes `cell` out of the map if it is still the one under its key.
    pub fn forget(&self, cell: &ActorCell) {
        let cells = self.cells.pin();
        let _ = cells.remove_if(cell.id.key(), |_, c| std::ptr::eq(Arc::as_ptr(c), cell));
    }
}

/// All deployed types, by name.
#[derive(Default)]
pub(crate) struct Registry {
    types: papaya::HashMap<String, Arc<TypeEntry>>,
    /// Serialises deploys of (new versions of) types; lookups never take it.
    deploy: Mutex<()>,
}

impl Registry {
    pub fn get(&self, name: &str) -> Option<Arc<TypeEntry>> {
        self.types.pin().get(name).cloned()
    }

    /// Deploys `module` as type `name`: a new type, or a new version of an existing one.
    pub fn insert_or_replace(&self, name: &str, module: ModuleVersion) -> (Arc<TypeEntry>, u64) {
        let _deploying = self.deploy.lock();
        let types = self.types.pin();
        if let Some(t) = types.get(name) {
            let v = t.ty.replace(module);
            return (t.clone(), v);
        }
        let v = module.version;
        let t = Arc::new(TypeEntry::new(ActorType::new(name, module)));
        types.insert(name.to_string(), t.clone());
        (t, v)
    }

    pub fn all(&self) -> Vec<Arc<TypeEntry>> {
        self.types.pin().values().cloned().collect()
    }
}
