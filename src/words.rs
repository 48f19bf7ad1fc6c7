//! The names a mistyped word was meant to be, for "did you mean" in
//! messages (a field, a format, an output): pure text, no allocation beyond
//! the answer.

/// The edits between `a` and `b`, by bytes: insertions, deletions, changes
/// and swaps of two neighbours (`slde` is one from `sled`), each 1.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let width = b.len() + 1;
    // d[i * width + j]: the distance between a[..i] and b[..j].
    let mut d: Vec<usize> = vec![0; (a.len() + 1) * width];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * width + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let change = usize::from(a[i - 1] != b[j - 1]);
                let mut best = (d[(i - 1) * width + j] + 1)
                    .min(d[i * width + j - 1] + 1)
                    .min(d[(i - 1) * width + j - 1] + change);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    best = best.min(d[(i - 2) * width + j - 2] + 1);
                }
                best
            };
        }
    }
    d[a.len() * width + b.len()]
}

/// `text` as it is compared: lower case, without blanks, `-` and `_` (`FH 5`,
/// `fh-5` and `fh_5` are all `fh5`).
fn folded(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The candidates closest to `text`, at most `most` edits away (case, blanks,
/// `-` and `_` aside): every one at the smallest distance, in their order.
pub fn closest<'a>(text: &str, candidates: &[&'a str], most: usize) -> Vec<&'a str> {
    let text = folded(text);
    let distances: Vec<usize> = candidates
        .iter()
        .map(|c| edit_distance(&text, &folded(c)))
        .collect();
    let Some(best) = distances.iter().copied().min().filter(|d| *d <= most) else {
        return Vec::new();
    };
    candidates
        .iter()
        .zip(&distances)
        .filter(|(_, d)| **d == best)
        .map(|(c, _)| *c)
        .collect()
}

/// ` (did you mean "fh5"?)`, ` (did you mean "fh4", "fh5" or "fh6"?)`, or
/// nothing: what to add to a message about `text`, one of `candidates` meant.
pub fn did_you_mean(text: &str, candidates: &[&str]) -> String {
    // A short id is two edits from most others: one is a likelier typo.
    let most = if folded(text).len() <= 4 { 1 } else { 2 };
    let close = closest(text, candidates, most);
    let quoted: Vec<String> = close.iter().map(|c| format!("{c:?}")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => format!(" (did you mean {one}?)"),
        [rest @ .., last] => format!(" (did you mean {} or {last}?)", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: [&str; 9] = [
        "same", "json", "influx", "sled", "fm7", "fm2023", "fh4", "fh5", "fh6",
    ];

    #[test]
    fn a_typo_of_one_name_names_it() {
        for (typo, meant) in [
            ("fm8", "fm7"),
            ("fm2024", "fm2023"),
            ("FH-5", "fh5"),
            ("fh 6", "fh6"),
            ("jsonl", "json"),
            ("influxdb", "influx"),
            ("slde", "sled"),
        ] {
            assert_eq!(
                did_you_mean(typo, &IDS),
                format!(" (did you mean {meant:?}?)"),
                "{typo}"
            );
        }
    }

    #[test]
    fn a_typo_as_close_to_several_names_names_them_all() {
        assert_eq!(
            did_you_mean("fh7", &IDS),
            r#" (did you mean "fm7", "fh4", "fh5" or "fh6"?)"#
        );
    }

    #[test]
    fn a_word_far_from_every_name_names_none() {
        for far in ["motorsport", "horizon", "csv", "x"] {
            assert_eq!(did_you_mean(far, &IDS), "", "{far}");
        }
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_and_changes() {
        assert_eq!(edit_distance("speed", "sped"), 1);
        assert_eq!(edit_distance("gear_lable", "gear_label"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
    }
}
