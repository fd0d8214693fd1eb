//! The deployed actor types and, per type, its live activations by key.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::actor_type::ActorType;
use super::cell::{ActorCell, Inbox, InboxState};
use super::module::ModuleVersion;

/// A deployed type and the map of its activations.
pub(crate) struct TypeEntry {
    pub ty: Arc<ActorType>,
    pub cells: Mutex<HashMap<Arc<str>, Arc<ActorCell>>>,
}

impl TypeEntry {
    /// The activation of `key`, if there is one.
    pub fn get(&self, key: &str) -> Option<Arc<ActorCell>> {
        self.cells.lock().get(key).cloned()
    }

    /// Every activation (a snapshot).
    pub fn cells(&self) -> Vec<Arc<ActorCell>> {
        self.cells.lock().values().cloned().collect()
    }

    /// Closes `cell` and takes it out of the map if `idle` holds under both locks (the map's,
    /// then the inbox's: the one order anything takes both in, so this cannot deadlock).
    /// Senders that still hold the cell find it closed and look the key up again.
    pub fn close_if(&self, cell: &ActorCell, idle: impl Fn(&Inbox) -> bool) -> bool {
        let mut cells = self.cells.lock();
        let mut inbox = cell.inbox.lock();
        if inbox.state != InboxState::Open || !idle(&inbox) {
            return false;
        }
        inbox.state = InboxState::Closed;
        if cells
            .get(cell.id.key())
            .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), cell))
        {
            cells.remove(cell.id.key());
        }
        true
    }
}

/// All deployed types, by name.
#[derive(Default)]
pub(crate) struct Registry {
    types: RwLock<HashMap<String, Arc<TypeEntry>>>,
}

impl Registry {
    pub fn get(&self, name: &str) -> Option<Arc<TypeEntry>> {
        self.types.read().get(name).cloned()
    }

    /// Deploys `module` as type `name`: a new type, or a new version of an existing one.
    pub fn insert_or_replace(&self, name: &str, module: ModuleVersion) -> (Arc<TypeEntry>, u64) {
        let mut types = self.types.write();
        if let Some(t) = types.get(name) {
            let v = t.ty.replace(module);
            return (t.clone(), v);
        }
        let v = module.version;
        let t = Arc::new(TypeEntry {
            ty: Arc::new(ActorType::new(name, module)),
            cells: Mutex::new(HashMap::new()),
        });
        types.insert(name.to_string(), t.clone());
        (t, v)
    }

    pub fn all(&self) -> Vec<Arc<TypeEntry>> {
        self.types.read().values().cloned().collect()
    }
}
