//! String interning: labels, namespaces, resource names and profile names repeat across
//! hundreds of thousands of objects, so each distinct string is stored once.

use std::collections::HashMap;
use std::sync::Arc;

/// A handle to an interned string. Cheap to copy, compare and hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Sym(pub u32);

#[derive(Default, Debug, Clone)]
pub struct Interner {
    by_str: HashMap<Arc<str>, Sym>,
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
