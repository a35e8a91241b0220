//! String interning: labels, namespaces, resource names and profile names repeat across
//! hundreds of thousands of objects, so each distinct string is stored once.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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

/// Every distinct string once, in one buffer: a string costs its bytes, its start (8 bytes)
/// and a 4-byte slot of the table, where a map of `Arc<str>` keys with a vector beside it
/// cost about 140 bytes for a 40-byte GPU uuid (a million of those at 65,000 nodes).
#[derive(Debug, Clone)]
pub struct Interner {
    /// The strings, one after the other...
    bytes: String,
    /// ...string `n` from `starts[n]` to `starts[n + 1]` (one more start than strings).
    starts: Vec<usize>,
    /// The symbols, found by their string's hash.
    table: hashbrown::HashTable<Sym>,
}

impl Default for Interner {
    fn default() -> Self {
        Interner { bytes: String::new(), starts: vec![0], table: hashbrown::HashTable::new() }
    }
}

fn hash_of(s: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(s.as_bytes());
    h.finish()
}

/// String `sym` of `bytes` cut at `starts`.
fn cut<'a>(bytes: &'a str, starts: &[usize], sym: Sym) -> &'a str {
    let i = sym.0 as usize;
    match (starts.get(i), starts.get(i + 1)) {
        (Some(&a), Some(&b)) => bytes.get(a..b).unwrap_or(""),
        _ => "",
    }
}

impl Interner {
    pub fn new() -> Self {
        let mut i = Self::default();
        // Sym(0) is always the empty string, so `Sym::default()` is meaningful.
        i.intern("");
        i
    }

    pub fn intern(&mut self, s: &str) -> Sym {
        let hash = hash_of(s);
        let Interner { bytes, starts, table } = self;
        if let Some(&sym) = table.find(hash, |&sym| cut(bytes, starts, sym) == s) {
            return sym;
        }
        let sym = Sym((starts.len() - 1) as u32);
        bytes.push_str(s);
        starts.push(bytes.len());
        table.insert_unique(hash, sym, |&sym| hash_of(cut(bytes, starts, sym)));
        sym
    }

    /// Looks a string up without adding it.
    pub fn get(&self, s: &str) -> Option<Sym> {
        self.table.find(hash_of(s), |&sym| self.resolve(sym) == s).copied()
    }

    pub fn resolve(&self, sym: Sym) -> &str {
        cut(&self.bytes, &self.starts, sym)
    }

    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    /// Gives back what the buffers grew beyond their contents (after the initial listing).
    pub fn shrink_to_fit(&mut self) {
        let Interner { bytes, starts, table } = self;
        bytes.shrink_to_fit();
        starts.shrink_to_fit();
        table.shrink_to_fit(|&sym| hash_of(cut(bytes, starts, sym)));
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
        // Many strings: each found again, the buffers shrunk without losing one.
        let syms: Vec<Sym> = (0..5000).map(|n| i.intern(&format!("GPU-{n:08x}-uuid"))).collect();
        i.shrink_to_fit();
        for (n, sym) in syms.iter().enumerate() {
            let s = format!("GPU-{n:08x}-uuid");
            assert_eq!((i.resolve(*sym), i.get(&s)), (s.as_str(), Some(*sym)));
            assert_eq!(i.intern(&s), *sym);
        }
        assert_eq!((i.len(), i.resolve(Sym(u32::MAX))), (5003, ""));
        assert_eq!(i.intern("team-b"), b);
    }
}
