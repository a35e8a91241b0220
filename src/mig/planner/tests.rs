use super::super::catalog::{find_profile, profile};
use super::*;
use proptest::prelude::*;

fn ids(model: GpuModel, names: &[&str]) -> Vec<ProfileId> {
    names.iter().map(|n| find_profile(model, n).unwrap_or_else(|| panic!("{model} {n}"))).collect()
}

/// The seven profiles by role, for tables that run on every model.
fn roles(model: GpuModel) -> [ProfileId; 7] {
    let mut r = [ProfileId(0); 7];
    for (i, slot) in r.iter_mut().enumerate() {
        *slot = ProfileId(i as u8);
    }
    assert_eq!(catalog(model).len(), 7);
    r
}

#[test]
fn masks_and_sizes() {
    let m = GpuModel::A100_80GB;
    let p = |id, start| PlacedInstance { profile: ProfileId(id), start };
    assert_eq!(p(4, 4).memory_mask(m), 0b1111_0000);
    assert_eq!(p(4, 4).size(m), 4);
    assert_eq!(p(0, 6).memory_mask(m), 0b0100_0000);
    assert_eq!(p(6, 0).memory_mask(m), 0xFF);
    assert_eq!(p(2, 6).memory_mask(m), 0b1100_0000);
    // Out-of-range input is clipped, never a panic.
    assert_eq!(p(6, 4).memory_mask(m), 0b1111_0000);
    assert_eq!(p(0, 200).memory_mask(m), 0);
    assert_eq!(p(99, 0).memory_mask(m), 0);
    assert_eq!(p(99, 0).size(m), 0);
}

#[test]
fn text_helpers() {
    assert_eq!(mask_ranges(0b1100_1111), "0-3, 6-7");
    assert_eq!(mask_ranges(0b1000_0000), "7");
    assert_eq!(mask_ranges(0), "");
    assert_eq!(starts_words(&[0, 2, 4]), "0, 2 or 4");
    assert_eq!(starts_words(&[0, 1, 2, 3, 4, 5, 6]), "0-6");
    assert_eq!(starts_words(&[0, 4]), "0 or 4");
    assert_eq!(starts_words(&[0]), "0");
}

/// Valid layouts, by role, on every model.
#[test]
fn valid_layouts_every_model() {
    for model in GpuModel::ALL {
        let [g1, me, g1x2, g2, g3, g4, g7] = roles(model);
        let cases: Vec<Vec<ProfileId>> = vec![
            vec![],
            vec![g1; 7],
            vec![g4, g3],
            vec![g3, g4],
            vec![g3, g3],
            vec![g7],
            vec![g1x2; 4],
            vec![g2; 3],
            vec![g2, g2, g2, g1],
            vec![g3, g2, g1, g1],
            vec![me, g1, g1, g1, g1, g1, g1],
            vec![g4, g2, g1],
            vec![g4, g1x2, g1x2],
            vec![g1x2, g1, g1, g1, g1, g1, g1],
            vec![g3, g1x2, g1x2],
        ];
        for case in cases {
            let placed = plan(model, &case).unwrap_or_else(|e| panic!("{model} {case:?}: {e}"));
            assert_eq!(placed.len(), case.len());
            for (inst, id) in placed.iter().zip(&case) {
                assert_eq!(inst.profile, *id, "input order kept");
            }
            validate_placement(model, &placed).unwrap_or_else(|e| panic!("{model}: {e}"));
        }
    }
}

#[test]
fn invalid_layouts_every_model() {
    for model in GpuModel::ALL {
        let [g1, me, g1x2, g2, g3, g4, g7] = roles(model);
        let name = |id: ProfileId| profile(model, id).name;

        let e = plan(model, &[g3, g3, g1]).unwrap_err();
        match &e {
            LayoutError::NoPlacement { profiles, detail } => {
                assert_eq!(profiles, &[name(g3), name(g3), name(g1)]);
                assert!(detail.contains("0-3"), "{detail}");
                assert!(detail.contains("4-7"), "{detail}");
                assert!(detail.contains(&format!("leaving none for {}", name(g1))), "{detail}");
            }
            other => panic!("{model}: {other}"),
        }

        assert_eq!(
            plan(model, &[g4, g4]).unwrap_err(),
            LayoutError::TooMany { profile: name(g4), requested: 2, max: 1 }
        );
        assert_eq!(
            plan(model, &[g1; 8]).unwrap_err(),
            LayoutError::TooMany { profile: name(g1), requested: 8, max: 7 }
        );
        assert_eq!(
            plan(model, &[me, g1, me]).unwrap_err(),
            LayoutError::TooMany { profile: name(me), requested: 2, max: 1 }
        );
        assert_eq!(plan(model, &[g3, g3, g2]).unwrap_err(), LayoutError::NotEnoughCompute { needed: 8, available: 7 });
        assert_eq!(plan(model, &[g7, g1]).unwrap_err(), LayoutError::NotEnoughCompute { needed: 8, available: 7 });
        // Nine memory slices: a placement failure that says so.
        match plan(model, &[g1x2, g1x2, g1x2, g1x2, g1]).unwrap_err() {
            LayoutError::NoPlacement { detail, .. } => {
                assert!(detail.contains("(9 memory slices asked for, 8 exist)"), "{detail}");
            }
            other => panic!("{model}: {other}"),
        }
        assert_eq!(
            plan(model, &[g2, g2, g2, g1, g1]).unwrap_err(),
            LayoutError::NotEnoughCompute { needed: 8, available: 7 }
        );
        assert!(matches!(plan(model, &[g4, g1x2, g1x2, g1]).unwrap_err(), LayoutError::NoPlacement { .. }));
        // The 1g family shares the seven compute slices: no eighth 1g of any kind.
        let mut eight = vec![g1; 6];
        eight.extend([me, g1x2]);
        assert_eq!(plan(model, &eight).unwrap_err(), LayoutError::NotEnoughCompute { needed: 8, available: 7 });
        // Within every total, but both 3g slots are taken and 1g never starts at 7.
        assert!(matches!(plan(model, &[g3, me, g3]).unwrap_err(), LayoutError::NoPlacement { .. }));
        assert!(matches!(plan(model, &[ProfileId(7)]).unwrap_err(), LayoutError::UnknownProfile { .. }));
    }
}

#[test]
fn messages_say_why() {
    let m = GpuModel::H100_80GB;
    let e = plan_names(m, &["5g.50gb"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "H100-80GB has no MIG profile \"5g.50gb\"; profiles: 1g.10gb, 1g.10gb+me, \
         1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"
    );
    let e = plan_names(m, &["1g.18gb"]).unwrap_err();
    match &e {
        LayoutError::UnknownProfile { known, .. } => assert_eq!(known, &known_names(m)),
        other => panic!("{other}"),
    }
    let e = plan_names(m, &["4g.40gb", "4g.40gb"]).unwrap_err();
    assert_eq!(e.to_string(), "too many 4g.40gb: 2 requested, at most 1 fits on one GPU");
    let e = plan_names(m, &["2g.20gb"; 4]).unwrap_err();
    assert_eq!(e.to_string(), "too many 2g.20gb: 4 requested, at most 3 fit on one GPU");
    let e = plan_names(m, &["3g.40gb", "3g.40gb", "2g.20gb", "1g.10gb"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "not enough compute slices: the layout needs 9 of 7 (drop instances worth 2 \
         compute slices)"
    );
    let e = plan_names(m, &["3g.40gb", "3g.40gb", "1g.10gb"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no non-overlapping placement for 3g.40gb, 3g.40gb, 1g.10gb: 3g.40gb at 0-3 and \
         3g.40gb at 4-7 use every memory slice, leaving none for 1g.10gb (9 memory \
         slices asked for, 8 exist); it fits without one 1g.10gb"
    );
    let e = plan_names(m, &["2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"]);
    assert!(e.is_ok(), "1g takes slice 6");
    let e = plan_names(m, &["4g.40gb", "1g.20gb", "1g.20gb", "1g.10gb"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no non-overlapping placement for 4g.40gb, 1g.20gb, 1g.20gb, 1g.10gb: 4g.40gb at \
         0-3, 1g.20gb at 4-5 and 1g.20gb at 6-7 use every memory slice, leaving none for \
         1g.10gb (9 memory slices asked for, 8 exist); it fits without one 1g.10gb"
    );
    assert_eq!(
        LayoutError::NotEnoughMemory { needed: 9, available: 8 }.to_string(),
        "not enough memory slices: the layout needs 9 of 8 (drop instances worth 1 \
         memory slice)"
    );
    let one = [PlacedInstance { profile: ProfileId(0), start: 1 }];
    let e = plan_onto(m, &one, &ids(m, &["2g.20gb"; 3])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no non-overlapping placement for 1g.10gb, 2g.20gb, 2g.20gb, 2g.20gb: 1g.10gb at \
         1 (existing), 2g.20gb at 2-3 and 2g.20gb at 4-5 leave memory slices 0, 6-7 \
         free, but 2g.20gb needs 2 contiguous slices starting at 0, 2 or 4; it fits \
         without one 2g.20gb"
    );
}

#[test]
fn plan_is_deterministic_and_largest_first() {
    let m = GpuModel::A100_80GB;
    let input = ids(m, &["1g.10gb", "3g.40gb", "2g.20gb", "1g.10gb"]);
    let a = plan(m, &input).unwrap_or_default();
    let b = plan(m, &input).unwrap_or_default();
    assert_eq!(a, b);
    let starts: Vec<u8> = a.iter().map(|i| i.start).collect();
    // 3g at 0 leaves 2g only slot 4 and then one 1g slot (6): the search backtracks
    // and moves the 3g to 4, putting 2g at 0 and the 1g pair at 2 and 3.
    assert_eq!(starts, [2, 4, 0, 3]);
}

#[test]
fn plan_onto_keeps_existing() {
    let m = GpuModel::H100_80GB;
    let [g1, _me, g1x2, g2, g3, _g4, _g7] = roles(m);
    let existing = vec![PlacedInstance { profile: g3, start: 4 }];
    let out = plan_onto(m, &existing, &[g2, g1, g1]).unwrap_or_default();
    assert_eq!(out.len(), 4);
    assert_eq!(out[0], existing[0]);
    validate_placement(m, &out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out[1], PlacedInstance { profile: g2, start: 0 });

    // The 3g at 4 blocks the second 3g slot even though 4 memory slices are free.
    assert_eq!(plan_onto(m, &existing, &[g3]).map(|v| v.len()), Ok(2),);
    assert!(plan_onto(m, &existing, &[g3, g1]).is_err());

    // Free totals are what the errors count against.
    let existing = plan(m, &[g3, g2]).unwrap_or_default();
    assert_eq!(
        plan_onto(m, &existing, &[g2, g2]).unwrap_err(),
        LayoutError::NotEnoughCompute { needed: 4, available: 2 }
    );
    match plan_onto(m, &existing, &[g1x2, g1x2]).unwrap_err() {
        LayoutError::NoPlacement { detail, .. } => {
            assert!(detail.contains("(4 memory slices asked for, 2 free)"), "{detail}");
        }
        other => panic!("{other}"),
    }
    assert!(plan_onto(m, &existing, &[g2, g2]).unwrap_err().to_string().contains("only 2 of 7 are free"));
    // Max counts include what is already there.
    let existing = vec![PlacedInstance { profile: ProfileId(1), start: 3 }];
    assert_eq!(
        plan_onto(m, &existing, &[ProfileId(1)]).unwrap_err(),
        LayoutError::TooMany { profile: "1g.10gb+me", requested: 2, max: 1 }
    );
    // Adding nothing is fine; bad existing input is an error, not a panic.
    assert_eq!(plan_onto(m, &existing, &[]), Ok(existing.clone()));
    let bad = vec![PlacedInstance { profile: g3, start: 2 }];
    assert!(matches!(plan_onto(m, &bad, &[g1]), Err(LayoutError::NoPlacement { .. })));
    let overlap = vec![PlacedInstance { profile: g2, start: 0 }, PlacedInstance { profile: g1, start: 1 }];
    let e = plan_onto(m, &overlap, &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no non-overlapping placement for 2g.20gb, 1g.10gb: 1g.10gb at memory slice 1 \
         overlaps 2g.20gb at 0-1"
    );
    let unknown = vec![PlacedInstance { profile: ProfileId(42), start: 0 }];
    assert!(matches!(plan_onto(m, &unknown, &[]), Err(LayoutError::UnknownProfile { .. })));
}

#[test]
fn fragmentation_after_partial_layouts() {
    let m = GpuModel::A100_80GB;
    let [g1, me, g1x2, g2, g3, g4, g7] = roles(m);
    let f = fragmentation(m, &[PlacedInstance { profile: g3, start: 0 }]);
    assert_eq!(f.used_memory_mask, 0b0000_1111);
    assert_eq!(f.used_compute, 3);
    assert_eq!(f.free_memory_slices, 4);
    assert_eq!(f.free_compute_slices, 4);
    // 2g may only start at 0, 2, 4 and 1g never at 7, so slices 4-7 take one 2g and
    // three 1g, not two and four.
    let want = [(g1, 3), (me, 1), (g1x2, 2), (g2, 1), (g3, 1), (g4, 0), (g7, 0)];
    assert_eq!(f.fits, want.to_vec());

    let empty = fragmentation(m, &[]);
    let want = [(g1, 7), (me, 1), (g1x2, 4), (g2, 3), (g3, 2), (g4, 1), (g7, 1)];
    assert_eq!(empty.fits, want.to_vec());
    assert_eq!(empty.free_memory_slices, 8);

    let full = fragmentation(m, &plan(m, &[g1; 7]).unwrap_or_default());
    assert_eq!(full.free_compute_slices, 0);
    assert_eq!(full.free_memory_slices, 1);
    assert!(full.fits.iter().all(|(_, n)| *n == 0));

    // A +me already there uses up the only +me.
    let f = fragmentation(m, &[PlacedInstance { profile: me, start: 0 }]);
    assert_eq!(f.fits_of(me), 0);
    assert_eq!(f.fits_of(g1), 6);
    assert_eq!(f.fits_of(ProfileId(77)), 0);

    // Compute, not memory, is the limit here.
    let f = fragmentation(m, &plan(m, &[g4, g2]).unwrap_or_default());
    assert_eq!(f.free_compute_slices, 1);
    assert_eq!(f.fits_of(g1), 1);
    assert_eq!(f.fits_of(g1x2), 1);
    assert_eq!(f.fits_of(g2), 0);
}

// ---- property tests -------------------------------------------------------------

/// An independent check of a plan, written from the rules rather than the planner.
fn respects_rules(model: GpuModel, want: &[ProfileId], got: &[PlacedInstance]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err("length".into());
    }
    let mut used = 0u16;
    let mut compute = 0u32;
    for (inst, id) in got.iter().zip(want) {
        if inst.profile != *id {
            return Err("order".into());
        }
        let p = profile(model, *id);
        if !p.starts.contains(&inst.start) {
            return Err(format!("{} at {}", p.name, inst.start));
        }
        let bits: u16 = ((1u16 << p.memory_slices) - 1) << inst.start;
        if bits > 0xFF || used & bits != 0 {
            return Err("overlap".into());
        }
        used |= bits;
        compute += u32::from(p.compute_slices);
    }
    if compute > 7 {
        return Err("compute".into());
    }
    for id in want {
        let n = want.iter().filter(|x| *x == id).count();
        if n > usize::from(profile(model, *id).max_count) {
            return Err("count".into());
        }
    }
    Ok(())
}

/// Brute force over every combination of starts, in input order, pruning only on
/// overlap (the rule itself). Also applies the count and compute rules.
fn brute_force_fits(model: GpuModel, want: &[ProfileId], base: u16) -> bool {
    fn go(model: GpuModel, want: &[ProfileId], used: u16) -> bool {
        let Some((first, rest)) = want.split_first() else {
            return true;
        };
        let p = profile(model, *first);
        p.starts.iter().any(|&s| {
            let bits: u16 = ((1u16 << p.memory_slices) - 1) << s;
            bits <= 0xFF && used & bits == 0 && go(model, rest, used | bits)
        })
    }
    let compute: u32 = want.iter().map(|id| u32::from(profile(model, *id).compute_slices)).sum();
    let counts_ok =
        want.iter().all(|id| want.iter().filter(|x| *x == id).count() <= usize::from(profile(model, *id).max_count));
    compute <= 7 && counts_ok && go(model, want, base)
}

fn model_strategy() -> impl Strategy<Value = GpuModel> {
    (0usize..5).prop_map(|i| GpuModel::ALL[i])
}

/// Small multisets, weighted towards small profiles so that many are feasible.
fn profiles_strategy() -> impl Strategy<Value = Vec<ProfileId>> {
    prop::collection::vec(
        prop_oneof![
            4 => Just(ProfileId(0)),
            1 => Just(ProfileId(1)),
            2 => Just(ProfileId(2)),
            2 => Just(ProfileId(3)),
            2 => Just(ProfileId(4)),
            1 => Just(ProfileId(5)),
            1 => Just(ProfileId(6)),
        ],
        0..9,
    )
}

proptest! {
    #[test]
    fn plan_is_sound_and_complete(model in model_strategy(), want in profiles_strategy()) {
        let brute = brute_force_fits(model, &want, 0);
        match plan(model, &want) {
            Ok(got) => {
                prop_assert_eq!(respects_rules(model, &want, &got), Ok(()));
                prop_assert!(brute);
            }
            Err(e) => {
                prop_assert!(!brute, "brute force found a placement, plan said: {}", e);
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn plan_onto_is_sound_and_complete(
        model in model_strategy(),
        first in profiles_strategy(),
        more in profiles_strategy(),
    ) {
        let Ok(existing) = plan(model, &first) else { return Ok(()); };
        let base = existing.iter().fold(0u16, |m, i| m | u16::from(i.memory_mask(model)));
        let mut all = first.clone();
        all.extend(&more);
        // Existing instances are fixed, so brute force only moves the new ones, but
        // counts and compute apply to the whole GPU.
        let compute: u32 = all.iter().map(|id| u32::from(profile(model, *id).compute_slices)).sum();
        let counts_ok = all.iter().all(|id| {
            all.iter().filter(|x| *x == id).count() <= usize::from(profile(model, *id).max_count)
        });
        let brute = compute <= 7 && counts_ok && brute_force_fits(model, &more, base);
        match plan_onto(model, &existing, &more) {
            Ok(got) => {
                prop_assert_eq!(&got[..existing.len()], &existing[..]);
                prop_assert_eq!(respects_rules(model, &all, &got), Ok(()));
                prop_assert!(brute);
            }
            Err(e) => prop_assert!(!brute, "brute force found a placement, plan_onto said: {}", e),
        }
    }

    /// Existing instances anywhere they may legally sit (not just where `plan` packs
    /// them), so that the search meets every kind of fragmentation.
    #[test]
    fn plan_onto_from_scattered_layouts(
        model in model_strategy(),
        raw in prop::collection::vec((0u8..7, 0usize..7), 0..5),
        more in profiles_strategy(),
    ) {
        let mut existing: Vec<PlacedInstance> = Vec::new();
        for (p, k) in raw {
            let starts = profile(model, ProfileId(p)).starts;
            let inst = PlacedInstance { profile: ProfileId(p), start: starts[k % starts.len()] };
            existing.push(inst);
            if validate_placement(model, &existing).is_err() {
                existing.pop();
            }
        }
        let base = existing.iter().fold(0u16, |m, i| m | u16::from(i.memory_mask(model)));
        let mut all: Vec<ProfileId> = existing.iter().map(|i| i.profile).collect();
        all.extend(&more);
        let compute: u32 = all.iter().map(|id| u32::from(profile(model, *id).compute_slices)).sum();
        let counts_ok = all.iter().all(|id| {
            all.iter().filter(|x| *x == id).count() <= usize::from(profile(model, *id).max_count)
        });
        let brute = compute <= 7 && counts_ok && brute_force_fits(model, &more, base);
        match plan_onto(model, &existing, &more) {
            Ok(got) => {
                prop_assert_eq!(&got[..existing.len()], &existing[..]);
                prop_assert_eq!(respects_rules(model, &all, &got), Ok(()));
                prop_assert!(brute);
            }
            Err(e) => prop_assert!(!brute, "brute force found a placement, plan_onto said: {}", e),
        }
        let f = fragmentation(model, &existing);
        for &(id, n) in &f.fits {
            prop_assert!(plan_onto(model, &existing, &vec![id; usize::from(n)]).is_ok());
            prop_assert!(plan_onto(model, &existing, &vec![id; usize::from(n) + 1]).is_err());
        }
    }

    #[test]
    fn fragmentation_fits_agree_with_plan_onto(model in model_strategy(), first in profiles_strategy()) {
        let Ok(existing) = plan(model, &first) else { return Ok(()); };
        let f = fragmentation(model, &existing);
        let used: u8 = existing.iter().map(|i| i.compute(model)).sum();
        prop_assert_eq!(f.used_compute, used);
        prop_assert_eq!(f.free_compute_slices, 7 - used);
        prop_assert_eq!(u32::from(f.free_memory_slices), 8 - f.used_memory_mask.count_ones());
        for &(id, n) in &f.fits {
            prop_assert!(plan_onto(model, &existing, &vec![id; usize::from(n)]).is_ok());
            prop_assert!(plan_onto(model, &existing, &vec![id; usize::from(n) + 1]).is_err());
        }
    }

    #[test]
    fn foreign_input_never_panics(
        model in model_strategy(),
        raw in prop::collection::vec((any::<u8>(), any::<u8>()), 0..6),
    ) {
        let placed: Vec<PlacedInstance> =
            raw.iter().map(|&(p, s)| PlacedInstance { profile: ProfileId(p % 9), start: s % 10 }).collect();
        let _ = fragmentation(model, &placed);
        let _ = validate_placement(model, &placed);
        let add: Vec<ProfileId> = raw.iter().map(|&(p, _)| ProfileId(p % 9)).collect();
        let _ = plan_onto(model, &placed, &add);
        let _ = plan(model, &add);
    }
}
