//! "Did you mean": the closest known names to an unknown one. Callers pass only names the
//! profile may see, so a hidden tool is never suggested.

/// Up to `n` names closest to `wanted`: first by shared words, then by edit distance.
pub fn closest<'a>(
    wanted: &str,
    known: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<String> {
    let wanted_l = wanted.to_lowercase();
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    // The upstream part is shared by every tool of that upstream; it says nothing about which.
    let mut want_words = words(&wanted_l);
    if want_words.len() > 1 {
        want_words.remove(0);
    }
    let mut scored: Vec<(usize, usize, &str)> = known
        .into_iter()
        .map(|k| {
            let kl = k.to_lowercase();
            let shared = words(&kl).iter().filter(|w| want_words.contains(w)).count();
            (usize::MAX - shared, strsim::levenshtein(&wanted_l, &kl), k)
        })
        .filter(|(miss, dist, k)| *miss < usize::MAX || *dist <= k.len().max(wanted.len()) / 2)
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(n)
        .map(|(_, _, k)| k.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_names_only() {
        let known = [
            "fs.read_file",
            "fs.write_file",
            "git.git_log",
            "time.get_current_time",
        ];
        assert_eq!(closest("fs.read_fil", known, 2)[0], "fs.read_file");
        assert_eq!(closest("read_file", known, 1), vec!["fs.read_file"]);
        assert!(closest("zzzzzz", known, 3).is_empty());
        assert_eq!(
            closest("fs.ad", known, 3),
            Vec::<String>::new(),
            "the upstream alone is no match"
        );
    }
}
