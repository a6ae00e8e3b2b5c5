//! The names a workspace is found by, checked before any path is built: an exec id is exactly a
//! canonical v4 UUID, a profile's directory is its name or its hex, and an upload's path is
//! relative, of plain components, not too deep and outside the run's scratch space.

use std::path::{Component, Path, PathBuf};

use uuid::Uuid;

use crate::ExecError;

pub(super) const MAX_PATH_DEPTH: usize = 16;

/// The exec id as a UUID, when `text` is exactly a canonical v4 UUID.
pub fn parse_id(text: &str) -> Result<Uuid, ExecError> {
    let unknown = || ExecError::UnknownExec(text.chars().take(60).collect());
    let id = Uuid::try_parse(text).map_err(|_| unknown())?;
    if id.get_version_num() != 4 || id.hyphenated().to_string() != text {
        return Err(unknown());
    }
    Ok(id)
}

/// A profile's directory name: the name itself when it is a plain word, else its hex.
pub(super) fn profile_dir(profile: &str) -> String {
    let plain = !profile.is_empty()
        && !profile.starts_with('.')
        && profile
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if plain {
        profile.to_string()
    } else {
        hex::encode(profile)
    }
}

/// A workspace-relative path of plain components, or why not.
pub fn confined(path: &str) -> Result<PathBuf, ExecError> {
    let bad = |why: &str| {
        ExecError::BadPath(format!(
            "{}: {why}",
            path.chars().take(120).collect::<String>()
        ))
    };
    if path.is_empty() {
        return Err(bad("empty"));
    }
    if path.contains('\0') {
        return Err(bad("contains NUL"));
    }
    let p = Path::new(path);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => return Err(bad("`..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(bad("must be relative to the workspace"));
            }
        }
    }
    if out.as_os_str().is_empty() {
        return Err(bad("names no file"));
    }
    if out.components().count() > MAX_PATH_DEPTH {
        return Err(bad("too deep"));
    }
    if out
        .components()
        .next()
        .is_some_and(|c| c.as_os_str() == ".tmp")
    {
        return Err(bad("`.tmp` is the run's scratch space"));
    }
    Ok(out)
}
