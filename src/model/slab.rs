//! `Slab<Id, T>`: a vector of slots addressed by a typed id, reusing freed slots, so an
//! id stays small and stable for as long as its object lives (views keep ids as row ids).

use std::marker::PhantomData;

/// An id that names a slot of a [`Slab`]: a `u32` index wrapped in its own type.
pub trait SlabId: Copy {
    fn from_index(index: u32) -> Self;
    fn index(self) -> u32;
}

/// Slots addressed by `Id`. Freed slots are reused last-freed first.
#[derive(Clone, Debug)]
pub struct Slab<Id, T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    len: usize,
    _id: PhantomData<fn() -> Id>,
}

impl<Id, T> Default for Slab<Id, T> {
    fn default() -> Self {
        Self { slots: Vec::new(), free: Vec::new(), len: 0, _id: PhantomData }
    }
}

impl<Id: SlabId, T> Slab<Id, T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, id: Id) -> Option<&T> {
        self.slots.get(id.index() as usize).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, id: Id) -> Option<&mut T> {
        self.slots.get_mut(id.index() as usize).and_then(Option::as_mut)
    }

    pub fn contains(&self, id: Id) -> bool {
        self.get(id).is_some()
    }

    /// Stores `value` in a free slot (the last one freed) or a new one, and names it.
    pub fn insert(&mut self, value: T) -> Id {
        self.len += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(value);
                Id::from_index(i)
            }
            None => {
                self.slots.push(Some(value));
                Id::from_index(self.slots.len() as u32 - 1)
            }
        }
    }

    /// Takes the value out and frees its slot for the next insert.
    pub fn remove(&mut self, id: Id) -> Option<T> {
        let value = self.slots.get_mut(id.index() as usize)?.take()?;
        self.free.push(id.index());
        self.len -= 1;
        Some(value)
    }

    /// Gives back most of the room the slots grew beyond what they hold (a vector doubles
    /// as it grows: up to half of it is room), keeping an eighth more for the churn to
    /// come: shrunk to the last slot, the next insert would double it again.
    pub fn shrink_keeping_room(&mut self) {
        let n = self.slots.len();
        self.slots.shrink_to(n + n / 8);
        self.free.shrink_to_fit();
    }

    /// How many values are stored.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ids and values in id order.
    pub fn iter(&self) -> impl Iterator<Item = (Id, &T)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, v)| Some((Id::from_index(i as u32), v.as_ref()?)))
    }

    /// Ids in order.
    pub fn ids(&self) -> impl Iterator<Item = Id> + '_ {
        self.iter().map(|(id, _)| id)
    }

    /// Values in id order.
    pub fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots.iter().flatten()
    }
}

/// Implements [`SlabId`] for `struct Name(pub u32)` ids.
macro_rules! slab_ids {
    ($($id:ty),*) => {$(
        impl SlabId for $id {
            fn from_index(index: u32) -> Self {
                Self(index)
            }
            fn index(self) -> u32 {
                self.0
            }
        }
    )*};
}

slab_ids!(super::NodeId, super::GpuId, super::PodId, super::TenantId, super::QuotaId);

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Id(u32);
    slab_ids!(Id);

    #[test]
    fn freed_slots_are_reused_last_freed_first_and_ids_stay_put() {
        let mut s: Slab<Id, &str> = Slab::new();
        let (a, b, c) = (s.insert("a"), s.insert("b"), s.insert("c"));
        assert_eq!((a, b, c), (Id(0), Id(1), Id(2)));
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None, "a freed slot is freed once");
        assert_eq!(s.remove(c), Some("c"));
        assert_eq!(s.len(), 1);
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(Id(9)), None);
        assert_eq!(s.insert("d"), Id(2));
        assert_eq!(s.insert("e"), Id(0));
        assert_eq!(s.insert("f"), Id(3));
        if let Some(v) = s.get_mut(b) {
            *v = "B";
        }
        let all: Vec<(Id, &str)> = s.iter().map(|(i, v)| (i, *v)).collect();
        assert_eq!(all, vec![(Id(0), "e"), (Id(1), "B"), (Id(2), "d"), (Id(3), "f")]);
        assert_eq!(s.values().count(), s.len());
    }

    #[test]
    fn shrinking_keeps_every_value_and_an_eighth_more_room() {
        let mut s: Slab<Id, u32> = Slab::new();
        let ids: Vec<Id> = (0..1100).map(|n| s.insert(n)).collect();
        let grown = s.slots.capacity();
        s.remove(ids[10]);
        s.shrink_keeping_room();
        let room = s.slots.capacity();
        assert!(room >= 1237 && (room < grown || grown < 1237), "{grown} → {room}");
        assert_eq!(s.insert(7), ids[10], "the freed slot is still reused");
        assert!(ids.iter().enumerate().all(|(n, id)| s.get(*id) == Some(&if n == 10 { 7 } else { n as u32 })));
    }
}
