//! Plain-text reports for the CLI: the profile table behind `fabrik mig profiles --model M`
//! and the placement report behind `fabrik mig plan --model M P,P,…`. ASCII only, so they
//! survive any terminal, log or issue comment.

use super::catalog::{COMPUTE_SLICES, GpuModel, MEMORY_SLICES, catalog, get_profile};
use super::planner::{PlacedInstance, fragmentation, mask_ranges, span, validate_placement};

#[derive(Clone, Copy, PartialEq)]
enum Align {
    Left,
    Right,
}

/// Lays rows out in columns two spaces apart; trailing blanks are trimmed.
fn table(header: &[&str], align: &[Align], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            if i > 0 {
                line.push_str("  ");
            }
            match align.get(i).copied().unwrap_or(Align::Left) {
                Align::Left => line.push_str(&format!("{cell:<w$}")),
                Align::Right => line.push_str(&format!("{cell:>w$}")),
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `"0,2,4 (size 2)"`; a run of three or more consecutive starts is shortened to `0-6`.
fn placements(starts: &[u8], size: u8) -> String {
    let contiguous = starts.len() > 2 && starts.windows(2).all(|w| w[1] == w[0] + 1);
    let list = match (starts.first(), starts.last()) {
        (Some(a), Some(b)) if contiguous => format!("{a}-{b}"),
        _ => starts.iter().map(u8::to_string).collect::<Vec<_>>().join(","),
    };
    format!("{list} (size {size})")
}

/// The catalog of `model` as a table: PROFILE, GI ID, COMPUTE, MEMORY (slices), MEMORY
/// MiB, SMs, MAX, PLACEMENTS, RESOURCE.
pub fn profiles_table(model: GpuModel) -> String {
    let rows: Vec<Vec<String>> = catalog(model)
        .iter()
        .map(|p| {
            vec![
                p.name.to_string(),
                p.gi_profile_id.to_string(),
                format!("{}/{COMPUTE_SLICES}", p.compute_slices),
                format!("{}/{MEMORY_SLICES}", p.memory_slices),
                p.memory_mib.to_string(),
                if p.sms == 0 { "-".to_string() } else { p.sms.to_string() },
                p.max_count.to_string(),
                placements(p.starts, p.memory_slices),
                p.resource_name(),
            ]
        })
        .collect();
    use Align::{Left, Right};
    let mut out = format!(
        "{model} ({}): {} MiB, {COMPUTE_SLICES} compute slices, {MEMORY_SLICES} memory slices\n",
        model.product_name(),
        model.memory_mib()
    );
    out.push_str(&table(
        &["PROFILE", "GI ID", "COMPUTE", "MEMORY", "MEMORY MiB", "SMs", "MAX", "PLACEMENTS", "RESOURCE"],
        &[Left, Right, Right, Right, Right, Right, Right, Left, Left],
        &rows,
    ));
    if catalog(model).iter().any(|p| p.sms == 0) {
        out.push_str("SMs: - where the reference data gives no count\n");
    }
    if !matches!(model, GpuModel::A100_40GB | GpuModel::A100_80GB) {
        // protocols.md §2 marks these as assumed, so say so where people read them.
        out.push_str("placements: A100 pattern, not confirmed for this model\n");
    }
    out
}

/// Inner width of one memory slice in the slice map; 7 fits a name like `1g.10gb`.
const CELL: usize = 7;

/// A label for `width` characters: `"3g.40gb 0-3"`, else `"3g.40gb"`, else `"3g"`.
fn cell_label(name: &str, at: &str, width: usize) -> String {
    let long = format!("{name} {at}");
    if long.len() <= width {
        return long;
    }
    if name.len() <= width {
        return name.to_string();
    }
    // "1g.10gb+me" -> "1g+me": the slice count and attribute say the most in little room.
    let g = name.split('.').next().unwrap_or(name);
    let short = if name.ends_with("+me") { format!("{g}+me") } else { g.to_string() };
    short.chars().take(width).collect()
}

/// One line per instance, an 8-cell memory-slice map, and what is left: free memory and
/// compute slices and which profiles would still fit (each on its own). Input that is not
/// a valid layout is still drawn, with a warning line saying what is wrong.
pub fn plan_report(model: GpuModel, placed: &[PlacedInstance]) -> String {
    let mut out = String::new();
    if placed.is_empty() {
        out.push_str(&format!("{model}: no MIG instances\n"));
    } else {
        out.push_str(&format!(
            "{model}: {} MIG {}\n",
            placed.len(),
            if placed.len() == 1 { "instance" } else { "instances" }
        ));
    }
    let rows: Vec<Vec<String>> = placed
        .iter()
        .map(|inst| match get_profile(model, inst.profile) {
            Some(p) => vec![
                format!("  {}", p.name),
                format!(
                    "memory {} {}",
                    if p.memory_slices == 1 { "slice" } else { "slices" },
                    span(inst.start, p.memory_slices)
                ),
                format!("compute {} {}", if p.compute_slices == 1 { "slice" } else { "slices" }, p.compute_slices),
                format!("placement {}:{}", inst.start, p.memory_slices),
            ],
            None => vec![format!("  #{}", inst.profile.0), format!("not a {model} profile")],
        })
        .collect();
    if !rows.is_empty() {
        let mut t = table(&["", "", "", ""], &[], &rows);
        // Drop the blank header line the table helper writes.
        if let Some(i) = t.find('\n') {
            t.drain(..=i);
        }
        out.push_str(&t);
    }

    // Who owns each memory slice; a second owner marks an overlap.
    let mut owner: [Option<usize>; MEMORY_SLICES as usize] = [None; MEMORY_SLICES as usize];
    let mut clash = [false; MEMORY_SLICES as usize];
    for (n, inst) in placed.iter().enumerate() {
        let m = inst.memory_mask(model);
        for i in 0..usize::from(MEMORY_SLICES) {
            if m & (1 << i) != 0
                && let (Some(o), Some(c)) = (owner.get_mut(i), clash.get_mut(i))
            {
                if o.is_some() {
                    *c = true;
                }
                *o = Some(n);
            }
        }
    }
    let mut head = String::from("slice |");
    for i in 0..MEMORY_SLICES {
        head.push_str(&format!("{:^CELL$}|", i));
    }
    let mut map = String::from("mem   |");
    let mut i = 0usize;
    let cells = usize::from(MEMORY_SLICES);
    while i < cells {
        let own = owner.get(i).copied().flatten();
        let bad = clash.get(i).copied().unwrap_or(false);
        let mut j = i + 1;
        while j < cells && owner.get(j).copied().flatten() == own && clash.get(j).copied().unwrap_or(false) == bad {
            j += 1;
        }
        let width = (j - i) * CELL + (j - i - 1);
        let label = if bad {
            "overlap".chars().take(width).collect()
        } else {
            match own.and_then(|n| placed.get(n)).and_then(|inst| get_profile(model, inst.profile)) {
                // The run's own slices, not the instance's: an overlap can cut it short.
                Some(p) => cell_label(p.name, &span(sat(i), sat(j - i)), width),
                None => "free".chars().take(width).collect(),
            }
        };
        if own.is_none() && !bad {
            map.push_str(&format!("{label:^width$}|"));
        } else {
            map.push_str(&format!("{label:<width$}|"));
        }
        i = j;
    }
    out.push_str(&head);
    out.push('\n');
    out.push_str(&map);
    out.push('\n');

    if let Err(e) = validate_placement(model, placed) {
        out.push_str(&format!("warning: {e}\n"));
    }
    let f = fragmentation(model, placed);
    let free_mask = !f.used_memory_mask;
    out.push_str(&format!(
        "free: {} of {MEMORY_SLICES} memory slices{}, {} of {COMPUTE_SLICES} compute slices\n",
        f.free_memory_slices,
        if free_mask == 0 { String::new() } else { format!(" ({})", mask_ranges(free_mask)) },
        f.free_compute_slices
    ));
    let fits: Vec<String> = f
        .fits
        .iter()
        .filter(|(_, n)| *n > 0)
        .filter_map(|(id, n)| get_profile(model, *id).map(|p| format!("{} x{n}", p.name)))
        .collect();
    if fits.is_empty() {
        out.push_str("still fits: nothing\n");
    } else {
        out.push_str(&format!("still fits (each alone): {}\n", fits.join(", ")));
    }
    out
}

fn sat(n: usize) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::catalog::ProfileId;
    use super::super::planner::{plan, plan_names};
    use super::*;

    #[test]
    fn profiles_table_h100() {
        let want = "\
H100-80GB (NVIDIA H100 80GB HBM3): 81920 MiB, 7 compute slices, 8 memory slices
PROFILE     GI ID  COMPUTE  MEMORY  MEMORY MiB  SMs  MAX  PLACEMENTS        RESOURCE
1g.10gb        19      1/7     1/8        9984   16    7  0-6 (size 1)      nvidia.com/mig-1g.10gb
1g.10gb+me     20      1/7     1/8        9984   16    1  0-6 (size 1)      nvidia.com/mig-1g.10gb.me
1g.20gb        15      1/7     2/8       20096   26    4  0,2,4,6 (size 2)  nvidia.com/mig-1g.20gb
2g.20gb        14      2/7     2/8       20096   32    3  0,2,4 (size 2)    nvidia.com/mig-2g.20gb
3g.40gb         9      3/7     4/8       40448   60    2  0,4 (size 4)      nvidia.com/mig-3g.40gb
4g.40gb         5      4/7     4/8       40448   64    1  0 (size 4)        nvidia.com/mig-4g.40gb
7g.80gb         0      7/7     8/8       81152  132    1  0 (size 8)        nvidia.com/mig-7g.80gb
placements: A100 pattern, not confirmed for this model
";
        assert_eq!(profiles_table(GpuModel::H100_80GB), want);
    }

    #[test]
    fn profiles_table_every_model() {
        let a = profiles_table(GpuModel::A100_40GB);
        assert!(a.contains("\n1g.5gb        19      1/7     1/8        4864    -    7  0-6 (size 1)"), "{a}");
        assert!(a.contains("SMs: - where the reference data gives no count\n"));
        assert!(!a.contains("placements: A100 pattern"));
        for m in GpuModel::ALL {
            let t = profiles_table(m);
            assert!(t.is_ascii());
            assert!(t.starts_with(&format!("{m} ({})", m.product_name())));
            for p in catalog(m) {
                assert!(t.contains(&format!("\n{} ", p.name)), "{m} {}", p.name);
                assert!(t.contains(&p.resource_name()));
            }
        }
    }

    #[test]
    fn plan_report_balanced() {
        let m = GpuModel::H100_80GB;
        let placed = plan_names(m, &["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]).unwrap_or_default();
        let r = plan_report(m, &placed);
        let want = "\
H100-80GB: 4 MIG instances
  3g.40gb  memory slices 0-3  compute slices 3  placement 0:4
  2g.20gb  memory slices 4-5  compute slices 2  placement 4:2
  1g.10gb  memory slice 6     compute slice 1   placement 6:1
  1g.10gb  memory slice 7     compute slice 1   placement 7:1
";
        // 3g at 0, 2g at 4, 1g at 6 and then nowhere: the planner moves the 3g to 4.
        assert!(!r.starts_with(want));
        let want = "\
H100-80GB: 4 MIG instances
  3g.40gb  memory slices 4-7  compute slices 3  placement 4:4
  2g.20gb  memory slices 0-1  compute slices 2  placement 0:2
  1g.10gb  memory slice 2     compute slice 1   placement 2:1
  1g.10gb  memory slice 3     compute slice 1   placement 3:1
slice |   0   |   1   |   2   |   3   |   4   |   5   |   6   |   7   |
mem   |2g.20gb 0-1    |1g.10gb|1g.10gb|3g.40gb 4-7                    |
free: 0 of 8 memory slices, 0 of 7 compute slices
still fits: nothing
";
        assert_eq!(r, want);
    }

    #[test]
    fn plan_report_partial() {
        let m = GpuModel::A100_80GB;
        let placed = plan_names(m, &["4g.40gb", "2g.20gb"]).unwrap_or_default();
        let want = "\
A100-80GB: 2 MIG instances
  4g.40gb  memory slices 0-3  compute slices 4  placement 0:4
  2g.20gb  memory slices 4-5  compute slices 2  placement 4:2
slice |   0   |   1   |   2   |   3   |   4   |   5   |   6   |   7   |
mem   |4g.40gb 0-3                    |2g.20gb 4-5    |     free      |
free: 2 of 8 memory slices (6-7), 1 of 7 compute slices
still fits (each alone): 1g.10gb x1, 1g.10gb+me x1, 1g.20gb x1
";
        assert_eq!(plan_report(m, &placed), want);

        let empty = plan_report(m, &[]);
        assert!(empty.starts_with("A100-80GB: no MIG instances\n"));
        assert!(empty.contains("mem   |"));
        assert!(empty.contains("free: 8 of 8 memory slices (0-7), 7 of 7 compute slices"));
        assert!(empty.contains("7g.80gb x1"));

        // A one-slice cell is too narrow for "1g.10gb+me": the short form keeps the "+me".
        let me = plan(m, &[ProfileId(1)]).unwrap_or_default();
        let r = plan_report(m, &me);
        assert!(r.contains("mem   |1g+me  |                         free                          |"), "{r}");
        assert!(r.contains("still fits (each alone): 1g.10gb x6, 1g.20gb x3, 2g.20gb x2, 3g.40gb x1\n"));
    }

    #[test]
    fn plan_report_survives_bad_input() {
        let m = GpuModel::B200;
        let bad = [
            PlacedInstance { profile: ProfileId(3), start: 0 },
            PlacedInstance { profile: ProfileId(0), start: 1 },
            PlacedInstance { profile: ProfileId(42), start: 3 },
            PlacedInstance { profile: ProfileId(6), start: 250 },
        ];
        let r = plan_report(m, &bad);
        assert!(r.contains("mem   |2g.45gb|overlap|"), "{r}");
        assert!(r.contains("#42"), "{r}");
        assert!(r.contains("warning: "), "{r}");
        assert!(r.is_ascii());
    }
}
