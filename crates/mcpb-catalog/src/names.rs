//! Exposed tool names: `<upstream><sep><tool>`, at most 64 characters. A longer name keeps its
//! head and gets a hash of the whole name as suffix, so two long names never collide and the
//! same tool always gets the same name.

use sha2::{Digest, Sha256};

/// Longest tool name clients accept.
pub const MAX_NAME: usize = 64;

/// The exposed name of `tool` of `upstream` with separator `sep`.
pub fn exposed(sep: &str, upstream: &str, tool: &str) -> String {
    let full = format!("{upstream}{sep}{tool}");
    if full.len() <= MAX_NAME {
        return full;
    }
    let digest = Sha256::digest(full.as_bytes());
    let suffix = hex::encode(&digest[..4]);
    // Cut on a character boundary so the name stays valid UTF-8 and ≤ 64 bytes.
    let mut head = MAX_NAME - suffix.len() - 1;
    while !full.is_char_boundary(head) {
        head -= 1;
    }
    format!("{}-{suffix}", &full[..head])
}

/// The upstream part of an exposed name: upstream names never contain a separator, so the
/// first one is the boundary. The tool is then found by comparing exposed names.
pub fn upstream_of<'a>(sep: &str, name: &'a str) -> Option<&'a str> {
    let (up, tool) = name.split_once(sep)?;
    (!up.is_empty() && !tool.is_empty()).then_some(up)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_plain_and_long_ones_hashed() {
        assert_eq!(exposed(".", "git", "log"), "git.log");
        assert_eq!(exposed("__", "git", "log"), "git__log");
        let long_a = exposed(".", "server", &"a".repeat(80));
        let long_b = exposed(".", "server", &format!("{}b", "a".repeat(79)));
        assert_eq!(long_a.len(), MAX_NAME);
        assert_ne!(long_a, long_b);
        assert!(long_a.starts_with("server.aaa"));
        assert_eq!(long_a, exposed(".", "server", &"a".repeat(80)), "stable");
        assert_eq!(upstream_of(".", &long_a), Some("server"));
        let wide = exposed(".", "s", &"é".repeat(60));
        assert!(wide.len() <= MAX_NAME);
    }
}
