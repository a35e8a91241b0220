//! Who cordoned a node: fabrik writes `fabrik.io/cordoned-by: <op> <kind> <user> <time>` in
//! the same patch that cordons, so an operation run again after an interruption knows the
//! cordon is an unfinished operation's and not a person's, and restores what was there before.
//!
//! - a reslice marks the node when it cordons it and removes the mark when it uncordons at
//!   the end; a reslice that finds a cordon marked by another reslice (interrupted, failed)
//!   uncordons at its end as that one would have;
//! - a drain leaves the node cordoned, which is its purpose, and its mark stays: a later
//!   reslice keeps such a node cordoned;
//! - a person's cordon (kubectl, or fabrik's cordon) is kept by every operation; fabrik's
//!   uncordon removes any mark.

use crate::cluster::labels::CORDONED_BY;

/// The parsed annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CordonMark {
    /// The audit log's op key.
    pub op: String,
    /// `reslice`, `drain`, `cordon`.
    pub kind: String,
    pub user: String,
    /// RFC 3339.
    pub time: String,
}

impl CordonMark {
    pub fn new(op: &str, kind: &str, user: &str, time: &str) -> CordonMark {
        let word = |s: &str, empty: &str| {
            let s: String = s.split_whitespace().collect::<Vec<_>>().join("_");
            if s.is_empty() { empty.to_string() } else { s }
        };
        CordonMark { op: word(op, "?"), kind: word(kind, "?"), user: word(user, "unknown"), time: word(time, "?") }
    }

    /// The annotation's value.
    pub fn value(&self) -> String {
        format!("{} {} {} {}", self.op, self.kind, self.user, self.time)
    }

    /// `None` for a value fabrik did not write (then the cordon is treated as a person's).
    pub fn parse(value: &str) -> Option<CordonMark> {
        let mut w = value.split_whitespace();
        let (op, kind, user, time) = (w.next()?, w.next()?, w.next()?, w.next()?);
        if w.next().is_some() {
            return None;
        }
        Some(CordonMark { op: op.into(), kind: kind.into(), user: user.into(), time: time.into() })
    }

    /// The node's mark, from its annotations.
    pub fn of(annotations: Option<&std::collections::BTreeMap<String, String>>) -> Option<CordonMark> {
        annotations.and_then(|a| a.get(CORDONED_BY)).and_then(|v| CordonMark::parse(v))
    }

    /// "fabrik op 1733-7 (reslice by admin at 2026-12-03T16:30:00Z)".
    pub fn describe(&self) -> String {
        format!("fabrik op {} ({} by {} at {})", self.op, self.kind, self.user, self.time)
    }
}

/// What a reslice does about the cordon once the new layout is in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CordonEnd {
    /// Uncordon and remove the mark; the reason is for the log.
    Uncordon(String),
    /// Leave the cordon as it was found.
    Keep(String),
}

/// `was_cordoned` and `mark`: the node before this reslice touched it.
pub fn reslice_end(node: &str, was_cordoned: bool, mark: Option<&CordonMark>) -> CordonEnd {
    match (was_cordoned, mark) {
        (false, _) => CordonEnd::Uncordon(format!("uncordoned {node}")),
        (true, Some(m)) if m.kind == "reslice" => {
            CordonEnd::Uncordon(format!("uncordoned {node}: it was cordoned by {}, which did not finish", m.describe()))
        }
        (true, Some(m)) => CordonEnd::Keep(format!("{node} stays cordoned, as {} left it", m.describe())),
        (true, None) => CordonEnd::Keep(format!("{node} stays cordoned, as it was before")),
    }
}

/// The preview's line for a node already cordoned, or `None` when it is not.
pub fn preview_line(node: &str, cordoned: bool, mark: Option<&CordonMark>) -> Option<String> {
    if !cordoned {
        return None;
    }
    Some(match reslice_end(node, true, mark) {
        CordonEnd::Uncordon(_) => format!(
            "{node} is cordoned by fabrik op {} ({}, interrupted); will be uncordoned at the end",
            mark.map(|m| m.op.as_str()).unwrap_or("?"),
            mark.map(|m| m.kind.as_str()).unwrap_or("?")
        ),
        CordonEnd::Keep(why) => why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_foreign_values_are_not_marks() {
        let m = CordonMark::new("1733-4", "reslice", "jane doe", "2026-12-03T16:30:00Z");
        assert_eq!(m.user, "jane_doe", "one word per field");
        assert_eq!(CordonMark::parse(&m.value()), Some(m.clone()));
        assert_eq!(CordonMark::new("", "drain", "", "t").value(), "? drain unknown t");
        assert_eq!(CordonMark::parse("maintenance by ops team tonight"), None);
        assert_eq!(CordonMark::parse("only three words"), None);
        let mut a = std::collections::BTreeMap::new();
        assert_eq!(CordonMark::of(Some(&a)), None);
        a.insert(CORDONED_BY.to_string(), m.value());
        assert_eq!(CordonMark::of(Some(&a)), Some(m));
    }

    #[test]
    fn a_reslice_restores_what_it_or_an_interrupted_reslice_changed() {
        let reslice = CordonMark::new("s-1", "reslice", "admin", "t");
        let drain = CordonMark::new("s-2", "drain", "admin", "t");
        assert!(matches!(reslice_end("n", false, None), CordonEnd::Uncordon(_)));
        let CordonEnd::Uncordon(why) = reslice_end("n", true, Some(&reslice)) else { panic!("uncordons") };
        assert!(why.contains("fabrik op s-1") && why.contains("did not finish"), "{why}");
        assert!(matches!(reslice_end("n", true, Some(&drain)), CordonEnd::Keep(w) if w.contains("s-2")));
        assert!(matches!(reslice_end("n", true, None), CordonEnd::Keep(w) if w.contains("as it was before")));
        assert_eq!(
            preview_line("n", true, Some(&reslice)).as_deref(),
            Some("n is cordoned by fabrik op s-1 (reslice, interrupted); will be uncordoned at the end")
        );
        assert_eq!(preview_line("n", false, Some(&reslice)), None);
    }
}
