//! What the tools remember about one computer between calls ([`ComputerState`]).
//!
//! The server makes one state when it makes a computer and hands the same
//! `Arc` to every call on that computer; a new computer (after a loss) gets
//! a new state, so nothing remembered of the old one is trusted. Each
//! family keeps its own memo in a slot of its own type, so a new family
//! with state is still one folder: nothing here names a family.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

/// Per-computer memory of the tool families, one slot per type.
#[derive(Default)]
pub struct ComputerState {
    slots: Mutex<Vec<(TypeId, Arc<dyn Any + Send + Sync>)>>,
}

impl ComputerState {
    /// A fresh state for a computer just made.
    pub fn new() -> Arc<ComputerState> {
        Arc::new(ComputerState::default())
    }

    /// The slot of type `T`, made with `T::default()` on first use. A family
    /// uses a private type (its `Mutex<Memo>`), so slots never collide.
    pub fn slot<T: Any + Default + Send + Sync>(&self) -> Arc<T> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let want = TypeId::of::<T>();
        if let Some((_, slot)) = slots.iter().find(|(t, _)| *t == want)
            && let Ok(slot) = Arc::clone(slot).downcast::<T>()
        {
            return slot;
        }
        let slot = Arc::new(T::default());
        slots.push((want, Arc::clone(&slot) as Arc<dyn Any + Send + Sync>));
        slot
    }
}

impl std::fmt::Debug for ComputerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.slots.lock().map(|s| s.len()).unwrap_or_default();
        f.debug_struct("ComputerState").field("slots", &n).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[derive(Default)]
    struct Counter(AtomicU32);

    #[derive(Default)]
    struct Other(Mutex<String>);

    #[test]
    fn a_slot_is_made_once_per_type_and_state() {
        let a = ComputerState::new();
        a.slot::<Counter>().0.fetch_add(1, Ordering::Relaxed);
        a.slot::<Counter>().0.fetch_add(1, Ordering::Relaxed);
        *a.slot::<Other>().0.lock().unwrap() = "kept".into();
        assert_eq!(a.slot::<Counter>().0.load(Ordering::Relaxed), 2);
        assert_eq!(*a.slot::<Other>().0.lock().unwrap(), "kept");
        // Another computer's state starts empty.
        let b = ComputerState::new();
        assert_eq!(b.slot::<Counter>().0.load(Ordering::Relaxed), 0);
        assert_eq!(*b.slot::<Other>().0.lock().unwrap(), "");
    }
}
