//! Typo suggestions for names people write ("did you mean …?").

/// Edit distance counting a swap of neighbours as one edit ("fsp" is one away from "fps").
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// How far a typo may be from the word it meant, by length: short words get less slack so
/// suggestions stay plausible.
fn tolerance(word: &str) -> usize {
    match word.chars().count() {
        0..=4 => 1,
        5..=8 => 2,
        _ => 3,
    }
}

/// Candidates within typo distance of `word`, closest first.
pub(crate) fn nearby<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>, limit: usize) -> Vec<&'a str> {
    // The distance table is quadratic; nobody mistypes a 64-character name.
    if word.chars().count() > 64 {
        return Vec::new();
    }
    let lower = word.to_lowercase();
    let mut scored: Vec<(usize, &'a str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= tolerance(word))
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(limit).map(|(_, c)| c).collect()
}

pub(crate) fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    nearby(word, candidates, 1).into_iter().next()
}
