//! String interning: labels, namespaces, resource names and profile names repeat across
//! hundreds of thousands of objects, so each distinct string is stored once.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// The Fx hash (as in rustc): much faster than SipHash for the short keys the fleet looks
/// up per delta. Keys come from the cluster's own objects, not from an attacker on the wire.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A HashMap with the Fx hash.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A handle to an interned string. Cheap to copy, compare and hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Sym(pub u32);

#[derive(Default, Debug, Clone)]
pub struct Interner {
    by_str: FastMap<Arc<str>, Sym>,
    strs: Vec<Arc<str>>,
}

impl Interner {
    pub fn new() -> Self {
        let mut i = Self::default();
        // Sym(0) is always the empty string, so `Sym::default()` is meaningful.
        i.intern("");
        i
    }

    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&sym) = self.by_str.get(s) {
            return sym;
        }
        let sym = Sym(self.strs.len() as u32);
        let arc: Arc<str> = Arc::from(s);
        self.strs.push(arc.clone());
        self.by_str.insert(arc, sym);
        sym
    }

    /// Looks a string up without adding it.
    pub fn get(&self, s: &str) -> Option<Sym> {
        self.by_str.get(s).copied()
    }

    pub fn resolve(&self, sym: Sym) -> &str {
        self.strs.get(sym.0 as usize).map(|s| &**s).unwrap_or("")
    }

    pub fn len(&self) -> usize {
        self.strs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strs.len() <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable_and_deduplicated() {
        let mut i = Interner::new();
        let a = i.intern("team-a");
        let b = i.intern("team-b");
        assert_ne!(a, b);
        assert_eq!(i.intern("team-a"), a);
        assert_eq!(i.resolve(a), "team-a");
        assert_eq!(i.resolve(Sym::default()), "");
        assert_eq!(i.get("missing"), None);
        assert_eq!(i.len(), 3);
    }
}
