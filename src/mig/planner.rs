//! The layout planner: turns a multiset of MIG profiles into concrete placements on one
//! GPU (or says exactly why it cannot), adds instances to a partly sliced GPU without
//! moving the ones already there, and measures what a partial layout leaves free.
//!
//! The model is the one protocols.md §2 gives: 7 compute slices counted as a total, 8
//! memory slices that instances occupy as `start:size` ranges at their profile's allowed
//! starts, and a per-profile maximum count. Compute-slice positions are not modelled.

use std::cmp::Reverse;
use std::fmt;

use super::catalog::{COMPUTE_SLICES, GpuModel, MEMORY_SLICES, Profile, ProfileId, catalog, get_profile, profile_ids};

/// One GPU instance at a concrete place: its profile and first memory slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlacedInstance {
    pub profile: ProfileId,
    /// First memory slice (0..8).
    pub start: u8,
}

impl PlacedInstance {
    /// Memory slices it occupies (its placement size); 0 for an id outside the catalog.
    pub fn size(&self, model: GpuModel) -> u8 {
        get_profile(model, self.profile).map_or(0, |p| p.memory_slices)
    }

    /// Compute slices it takes; 0 for an id outside the catalog.
    pub fn compute(&self, model: GpuModel) -> u8 {
        get_profile(model, self.profile).map_or(0, |p| p.compute_slices)
    }

    /// Bit `i` set for each memory slice `i` it occupies. Slices past the eighth (a
    /// start that no profile allows) are cut off rather than wrapped.
    pub fn memory_mask(&self, model: GpuModel) -> u8 {
        slice_mask(self.start, self.size(model))
    }
}

/// Bits `start..start+size` of a memory-slice mask, clipped to the 8 slices.
pub(crate) fn slice_mask(start: u8, size: u8) -> u8 {
    if start >= MEMORY_SLICES || size == 0 {
        return 0;
    }
    let bits = ((1u32 << u32::from(size.min(MEMORY_SLICES))) - 1) << u32::from(start);
    u8::try_from(bits & 0xFF).unwrap_or(0)
}

/// What a GPU should look like: MIG off, or MIG on with these instances.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    Disabled,
    /// MIG on; `Enabled(vec![])` is MIG mode with no instances (mig-parted `all-enabled`).
    Enabled(Vec<ProfileId>),
}

impl Layout {
    /// The instances it asks for; empty when MIG is off.
    pub fn profiles(&self) -> &[ProfileId] {
        match self {
            Layout::Disabled => &[],
            Layout::Enabled(v) => v,
        }
    }

    pub fn mig_enabled(&self) -> bool {
        matches!(self, Layout::Enabled(_))
    }
}

/// Why a layout cannot be used, in words a person can act on (see the `Display` impl).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The profile is not in the model's catalog (`known` lists the ones that are).
    UnknownProfile {
        model: GpuModel,
        profile: String,
        known: Vec<&'static str>,
    },
    /// More instances of one profile than a GPU holds.
    TooMany {
        profile: &'static str,
        requested: usize,
        max: u8,
    },
    /// Compute slices asked for exceed those available (7, or the free ones when adding).
    NotEnoughCompute {
        needed: u8,
        available: u8,
    },
    /// Memory slices asked for exceed those available (8, or the free ones when adding).
    ///
    /// [`plan`] and [`plan_onto`] do not return this: too few memory slices is always also
    /// a placement failure, and they report it as [`LayoutError::NoPlacement`], whose
    /// detail shows which slices are taken and carries the same arithmetic (so that
    /// 3g+3g+1g reads "3g at 0-3 and 3g at 4-7 … leaving none for 1g"). It stays for
    /// callers that check slice totals on their own.
    NotEnoughMemory {
        needed: u8,
        available: u8,
    },
    /// Counts and totals are fine but no arrangement avoids overlapping memory slices.
    NoPlacement {
        /// The instances that could not be placed together, largest first.
        profiles: Vec<&'static str>,
        /// One concrete failed arrangement, and what would fit instead.
        detail: String,
    },
    UnknownConfig {
        name: String,
        known: Vec<String>,
    },
    /// Nothing was given where a layout was expected.
    Empty,
    BadSyntax {
        input: String,
        detail: String,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::UnknownProfile { model, profile, known } => {
                write!(f, "{model} has no MIG profile \"{profile}\"; profiles: {}", known.join(", "))
            }
            LayoutError::TooMany { profile, requested, max } => write!(
                f,
                "too many {profile}: {requested} requested, at most {max} {} on one GPU",
                if *max == 1 { "fits" } else { "fit" }
            ),
            LayoutError::NotEnoughCompute { needed, available } => {
                if *available == COMPUTE_SLICES {
                    write!(f, "not enough compute slices: the layout needs {needed} of {available}")?;
                } else {
                    write!(
                        f,
                        "not enough compute slices: the new instances need {needed}, \
                         only {available} of {COMPUTE_SLICES} are free"
                    )?;
                }
                let over = needed.saturating_sub(*available);
                write!(f, " (drop instances worth {over} compute {})", plural(over, "slice"))
            }
            LayoutError::NotEnoughMemory { needed, available } => {
                if *available == MEMORY_SLICES {
                    write!(f, "not enough memory slices: the layout needs {needed} of {available}")?;
                } else {
                    write!(
                        f,
                        "not enough memory slices: the new instances need {needed}, \
                         only {available} of {MEMORY_SLICES} are free"
                    )?;
                }
                let over = needed.saturating_sub(*available);
                write!(f, " (drop instances worth {over} memory {})", plural(over, "slice"))
            }
            LayoutError::NoPlacement { profiles, detail } => {
                write!(f, "no non-overlapping placement for {}: {detail}", profiles.join(", "))
            }
            LayoutError::UnknownConfig { name, known } => write!(
                f,
                "unknown MIG config \"{name}\"; configs: {} (or a list of profiles such as \
                 \"3g.40gb,2g.20gb,2x1g.10gb\")",
                known.join(", ")
            ),
            LayoutError::Empty => f.write_str(
                "empty MIG layout: give a config name (e.g. all-balanced) or a \
                 comma-separated list of profiles",
            ),
            LayoutError::BadSyntax { input, detail } => {
                write!(f, "cannot read MIG layout \"{input}\": {detail}")
            }
        }
    }
}

impl std::error::Error for LayoutError {}

fn plural(n: u8, word: &str) -> String {
    if n == 1 { word.to_string() } else { format!("{word}s") }
}

/// The names of `model`'s profiles, for error messages.
pub(crate) fn known_names(model: GpuModel) -> Vec<&'static str> {
    catalog(model).iter().map(|p| p.name).collect()
}

fn unknown_id(model: GpuModel, id: ProfileId) -> LayoutError {
    LayoutError::UnknownProfile { model, profile: format!("#{}", id.0), known: known_names(model) }
}

fn sat_u8(n: usize) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// `"0-3"`, or `"6"` for a single slice.
pub(crate) fn span(start: u8, size: u8) -> String {
    if size <= 1 { start.to_string() } else { format!("{start}-{}", u16::from(start) + u16::from(size) - 1) }
}

/// The set bits of a slice mask as ranges: `"0-3, 6"`.
pub(crate) fn mask_ranges(mask: u8) -> String {
    let mut out = Vec::new();
    let mut i = 0u8;
    while i < MEMORY_SLICES {
        if mask & (1 << i) != 0 {
            let start = i;
            while i < MEMORY_SLICES && mask & (1 << i) != 0 {
                i += 1;
            }
            out.push(span(start, i - start));
        } else {
            i += 1;
        }
    }
    out.join(", ")
}

/// Allowed starts written as a person would: `"0, 2 or 4"`, `"0-6"`, `"0"`.
pub(crate) fn starts_words(starts: &[u8]) -> String {
    let contiguous = starts.windows(2).all(|w| w[1] == w[0] + 1);
    match starts {
        [] => "nowhere".to_string(),
        [one] => one.to_string(),
        [first, .., last] if contiguous && starts.len() > 2 => format!("{first}-{last}"),
        [init @ .., last] => {
            let init: Vec<String> = init.iter().map(u8::to_string).collect();
            format!("{} or {last}", init.join(", "))
        }
    }
}

/// One instance to place, with what the search needs at hand.
#[derive(Clone, Copy)]
struct Need {
    id: ProfileId,
    p: &'static Profile,
    /// Position in the caller's `add` list, so results come back in input order.
    input: usize,
}

/// Largest first: big instances have the fewest starts, so fixing them early prunes the
/// search hardest. Equal profiles end up adjacent, which the symmetry rule relies on.
fn planning_order(needs: &mut [Need]) {
    needs.sort_by_key(|n| (Reverse(n.p.memory_slices), Reverse(n.p.compute_slices), n.p.starts.len(), n.id, n.input));
}

/// Exhaustive backtracking over allowed starts. `starts[i]` receives the start of
/// `needs[i]`. Two instances of the same profile are interchangeable, so the later one is
/// only tried at starts above the earlier one's: that skips mirror-image arrangements
/// without losing any (every solution can be sorted that way), so the search stays
/// complete while 7 x 1g costs 7 nodes instead of 7!.
fn search(needs: &[Need], pos: usize, mask: u8, starts: &mut [u8]) -> bool {
    let Some(need) = needs.get(pos) else {
        return true;
    };
    let after = match pos.checked_sub(1).and_then(|i| needs.get(i)) {
        Some(prev) if prev.id == need.id => starts.get(pos - 1).copied(),
        _ => None,
    };
    for &s in need.p.starts {
        if after.is_some_and(|a| s <= a) {
            continue;
        }
        let m = slice_mask(s, need.p.memory_slices);
        if mask & m != 0 {
            continue;
        }
        if let Some(slot) = starts.get_mut(pos) {
            *slot = s;
        }
        if search(needs, pos + 1, mask | m, starts) {
            return true;
        }
    }
    false
}

fn feasible(needs: &[Need], mask: u8) -> bool {
    let mut starts = vec![0u8; needs.len()];
    search(needs, 0, mask, &mut starts)
}

/// Plans `profiles` on an empty GPU: one placement per instance, in input order.
///
/// Checks, in this order, so the error names the most basic problem: every id is in the
/// catalog; no profile exceeds its max count (so at most one `+me`); compute slices total
/// at most 7 (which also caps the 1g family at seven, each taking one compute slice);
/// memory slices total at most 8; then a complete backtracking search for
/// non-overlapping starts. Deterministic: the same input gives the same placements.
pub fn plan(model: GpuModel, profiles: &[ProfileId]) -> Result<Vec<PlacedInstance>, LayoutError> {
    plan_onto(model, &[], profiles)
}

/// [`plan`] for profile names in any spelling [`find_profile`](super::find_profile)
/// accepts.
pub fn plan_names(model: GpuModel, names: &[&str]) -> Result<Vec<PlacedInstance>, LayoutError> {
    let ids = names
        .iter()
        .map(|n| {
            super::catalog::find_profile(model, n).ok_or_else(|| LayoutError::UnknownProfile {
                model,
                profile: n.trim().to_string(),
                known: known_names(model),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    plan(model, &ids)
}

/// Checks that a set of placed instances is one a GPU can hold: known profiles, allowed
/// starts, no shared memory slice, max counts and the compute total respected.
pub fn validate_placement(model: GpuModel, placed: &[PlacedInstance]) -> Result<(), LayoutError> {
    let mut mask = 0u8;
    let mut owner: [Option<PlacedInstance>; MEMORY_SLICES as usize] = [None; MEMORY_SLICES as usize];
    for inst in placed {
        let p = get_profile(model, inst.profile).ok_or_else(|| unknown_id(model, inst.profile))?;
        if !p.starts.contains(&inst.start) {
            return Err(LayoutError::NoPlacement {
                profiles: vec![p.name],
                detail: format!(
                    "{} cannot start at memory slice {}; it starts at {}",
                    p.name,
                    inst.start,
                    starts_words(p.starts)
                ),
            });
        }
        let m = inst.memory_mask(model);
        if mask & m != 0 {
            let first = (0..MEMORY_SLICES).find(|i| m & mask & (1 << i) != 0).unwrap_or(0);
            let other = owner
                .get(usize::from(first))
                .copied()
                .flatten()
                .and_then(|o| get_profile(model, o.profile).map(|op| (op, o.start)));
            let (other_name, other_at) = match other {
                Some((op, s)) => (op.name, span(s, op.memory_slices)),
                None => ("another instance", first.to_string()),
            };
            return Err(LayoutError::NoPlacement {
                profiles: vec![other_name, p.name],
                detail: format!(
                    "{} at memory {} {} overlaps {other_name} at {other_at}",
                    p.name,
                    if p.memory_slices == 1 { "slice" } else { "slices" },
                    span(inst.start, p.memory_slices),
                ),
            });
        }
        for i in 0..MEMORY_SLICES {
            if m & (1 << i) != 0
                && let Some(o) = owner.get_mut(usize::from(i))
            {
                *o = Some(*inst);
            }
        }
        mask |= m;
    }
    let ids: Vec<ProfileId> = placed.iter().map(|i| i.profile).collect();
    check_counts(model, &[], &ids)?;
    Ok(())
}

/// Max counts, then the compute total, for `existing` plus `add`. Memory is left to the
/// placement search (see [`LayoutError::NotEnoughMemory`]).
fn check_counts(model: GpuModel, existing: &[ProfileId], add: &[ProfileId]) -> Result<(), LayoutError> {
    let cat = catalog(model);
    let mut counts = vec![0usize; cat.len()];
    let mut seen = Vec::new();
    for id in existing.iter().chain(add) {
        if let Some(c) = counts.get_mut(usize::from(id.0)) {
            if *c == 0 {
                seen.push(*id);
            }
            *c += 1;
        }
    }
    // Report the first profile (in input order) that is over its limit.
    for id in seen {
        let (Some(p), Some(&n)) = (get_profile(model, id), counts.get(usize::from(id.0))) else {
            continue;
        };
        if n > usize::from(p.max_count) {
            return Err(LayoutError::TooMany { profile: p.name, requested: n, max: p.max_count });
        }
    }
    let sum = |ids: &[ProfileId], f: fn(&Profile) -> u8| -> usize {
        ids.iter().filter_map(|id| get_profile(model, *id)).map(|p| usize::from(f(p))).sum()
    };
    let used_c = sum(existing, |p| p.compute_slices);
    let add_c = sum(add, |p| p.compute_slices);
    let free_c = usize::from(COMPUTE_SLICES).saturating_sub(used_c);
    if add_c > free_c {
        return Err(LayoutError::NotEnoughCompute { needed: sat_u8(add_c), available: sat_u8(free_c) });
    }
    Ok(())
}

/// Places `add` on a GPU that already holds `existing`, leaving those where they are (a
/// partial reslice: only the new instances are created). Returns `existing` unchanged
/// followed by the new instances in `add` order.
///
/// `existing` must itself be valid ([`validate_placement`]); `NotEnoughCompute` then
/// counts the new instances against the free compute slices.
pub fn plan_onto(
    model: GpuModel,
    existing: &[PlacedInstance],
    add: &[ProfileId],
) -> Result<Vec<PlacedInstance>, LayoutError> {
    validate_placement(model, existing)?;
    let mut needs = Vec::with_capacity(add.len());
    for (input, &id) in add.iter().enumerate() {
        let p = get_profile(model, id).ok_or_else(|| unknown_id(model, id))?;
        needs.push(Need { id, p, input });
    }
    let existing_ids: Vec<ProfileId> = existing.iter().map(|i| i.profile).collect();
    check_counts(model, &existing_ids, add)?;

    let base = existing.iter().fold(0u8, |m, i| m | i.memory_mask(model));
    planning_order(&mut needs);
    let mut starts = vec![0u8; needs.len()];
    if !search(&needs, 0, base, &mut starts) {
        return Err(no_placement(model, existing, &needs, base));
    }
    let mut placed = vec![PlacedInstance { profile: ProfileId(0), start: 0 }; add.len()];
    for (need, &start) in needs.iter().zip(&starts) {
        if let Some(slot) = placed.get_mut(need.input) {
            *slot = PlacedInstance { profile: need.id, start };
        }
    }
    let mut out = existing.to_vec();
    out.extend(placed);
    Ok(out)
}

/// Builds the `NoPlacement` error: replays the greedy first branch of the search
/// (largest first, lowest free start) to show one concrete dead end, then looks for a
/// single instance whose removal makes the rest fit, as the hint.
fn no_placement(model: GpuModel, existing: &[PlacedInstance], needs: &[Need], base: u8) -> LayoutError {
    let mut profiles: Vec<&'static str> =
        existing.iter().filter_map(|i| get_profile(model, i.profile).map(|p| p.name)).collect();
    profiles.extend(needs.iter().map(|n| n.p.name));

    let mut placed: Vec<String> = existing
        .iter()
        .filter_map(|i| {
            get_profile(model, i.profile)
                .map(|p| format!("{} at {} (existing)", p.name, span(i.start, p.memory_slices)))
        })
        .collect();
    let mut mask = base;
    let mut blocked = None;
    for need in needs {
        let free_start = need.p.starts.iter().copied().find(|&s| mask & slice_mask(s, need.p.memory_slices) == 0);
        match free_start {
            Some(s) => {
                mask |= slice_mask(s, need.p.memory_slices);
                placed.push(format!("{} at {}", need.p.name, span(s, need.p.memory_slices)));
            }
            None => {
                blocked = Some(need);
                break;
            }
        }
    }
    let mut detail = match blocked {
        Some(b) => {
            let who = if placed.is_empty() { "an empty GPU".to_string() } else { and_list(&placed) };
            let free = !mask;
            if free == 0 {
                format!("{who} use every memory slice, leaving none for {}", b.p.name)
            } else {
                format!(
                    "{who} leave memory {} {} free, but {} needs {} {} starting at {}",
                    if free.count_ones() == 1 { "slice" } else { "slices" },
                    mask_ranges(free),
                    b.p.name,
                    b.p.memory_slices,
                    if b.p.memory_slices == 1 { "slice" } else { "contiguous slices" },
                    starts_words(b.p.starts)
                )
            }
        }
        // Unreachable in practice (greedy is the search's first branch), but a message
        // beats a panic.
        None => "every arrangement overlaps in memory slices".to_string(),
    };
    let needed: usize = needs.iter().map(|n| usize::from(n.p.memory_slices)).sum();
    let free = base.count_zeros() as usize;
    if needed > free {
        if base == 0 {
            detail.push_str(&format!(" ({needed} memory slices asked for, {free} exist)"));
        } else {
            detail.push_str(&format!(" ({needed} memory slices asked for, {free} free)"));
        }
    }
    // Hint: the smallest single instance whose removal lets the rest fit.
    let mut tried: Vec<ProfileId> = Vec::new();
    for (i, need) in needs.iter().enumerate().rev() {
        if tried.contains(&need.id) {
            continue;
        }
        tried.push(need.id);
        let rest: Vec<Need> = needs.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, n)| *n).collect();
        if feasible(&rest, base) {
            detail.push_str(&format!("; it fits without one {}", need.p.name));
            break;
        }
    }
    LayoutError::NoPlacement { profiles, detail }
}

/// `"a"`, `"a and b"`, `"a, b and c"`.
pub(crate) fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// What a partial layout uses and leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragmentation {
    /// Bit `i` set when memory slice `i` is taken.
    pub used_memory_mask: u8,
    pub used_compute: u8,
    pub free_memory_slices: u8,
    pub free_compute_slices: u8,
    /// For every profile in catalog order: how many more of it alone could still be
    /// placed without moving anything (0 when none).
    pub fits: Vec<(ProfileId, u8)>,
}

impl Fragmentation {
    /// How many more of `id` alone fit (0 for an id outside the catalog).
    pub fn fits_of(&self, id: ProfileId) -> u8 {
        self.fits.iter().find(|(p, _)| *p == id).map_or(0, |(_, n)| *n)
    }
}

/// Measures `existing`. Lenient on purpose, as it describes what a node reports: ids
/// outside the catalog are ignored and overlapping instances simply share slices.
pub fn fragmentation(model: GpuModel, existing: &[PlacedInstance]) -> Fragmentation {
    let used_memory_mask = existing.iter().fold(0u8, |m, i| m | i.memory_mask(model));
    let used_compute = sat_u8(existing.iter().map(|i| usize::from(i.compute(model))).sum());
    let free_compute_slices = COMPUTE_SLICES.saturating_sub(used_compute);
    let fits = profile_ids(model)
        .filter_map(|id| {
            let p = get_profile(model, id)?;
            let present = existing.iter().filter(|i| i.profile == id).count();
            let by_count = usize::from(p.max_count).saturating_sub(present);
            let by_compute = usize::from(free_compute_slices / p.compute_slices.max(1));
            // Same-size intervals: taking the lowest free start each time is the classic
            // earliest-finish greedy, which is optimal for one profile on its own.
            let mut mask = used_memory_mask;
            let mut by_memory = 0usize;
            for &s in p.starts {
                let m = slice_mask(s, p.memory_slices);
                if mask & m == 0 {
                    mask |= m;
                    by_memory += 1;
                }
            }
            Some((id, sat_u8(by_count.min(by_compute).min(by_memory))))
        })
        .collect();
    Fragmentation {
        used_memory_mask,
        used_compute,
        free_memory_slices: MEMORY_SLICES - sat_u8(used_memory_mask.count_ones() as usize),
        free_compute_slices,
        fits,
    }
}

#[cfg(test)]
mod tests;
