//! Values that may hold secret references: `${ENV_NAME}` (read from the daemon's environment when
//! the upstream starts) and `${file:NAME}` (a file under the secrets dir). The references are what
//! the broker stores, shows and logs; the resolved text exists only in the child's environment.

use std::fmt;
use std::path::Path;

use serde::{Serialize, Serializer};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    Env(String),
    SecretFile(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unclosed `${{` reference")]
    Unclosed,
    #[error("`${{{0}}}` is not a valid reference (use ${{ENV_NAME}} or ${{file:NAME}})")]
    BadReference(String),
    #[error("environment variable {0} is not set")]
    MissingEnv(String),
    #[error("secret file {path} cannot be read: {reason}")]
    MissingFile { path: String, reason: String },
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_file_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl Template {
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            literal.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').ok_or(TemplateError::Unclosed)?;
            let inner = &after[..end];
            let part = if let Some(name) = inner.strip_prefix("file:") {
                if !is_file_name(name) {
                    return Err(TemplateError::BadReference(inner.to_string()));
                }
                Part::SecretFile(name.to_string())
            } else if is_env_name(inner) {
                Part::Env(inner.to_string())
            } else {
                return Err(TemplateError::BadReference(inner.to_string()));
            };
            if !literal.is_empty() {
                parts.push(Part::Literal(std::mem::take(&mut literal)));
            }
            parts.push(part);
            rest = &after[end + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Self { parts })
    }

    pub fn literal(text: impl Into<String>) -> Self {
        Self {
            parts: vec![Part::Literal(text.into())],
        }
    }

    pub fn has_reference(&self) -> bool {
        self.parts.iter().any(|p| !matches!(p, Part::Literal(_)))
    }

    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The text with every reference filled in. Secret files lose one trailing newline, which
    /// editors add and no credential contains.
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        secrets_dir: &Path,
    ) -> Result<String, TemplateError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(s) => out.push_str(s),
                Part::Env(name) => {
                    let value = env(name).ok_or_else(|| TemplateError::MissingEnv(name.clone()))?;
                    // Every value a reference resolves to is a secret from now on: it is taken
                    // out of any text that leaves the daemon.
                    mcpb_redact::register(&value);
                    out.push_str(&value);
                }
                Part::SecretFile(name) => {
                    let path = secrets_dir.join(name);
                    let text =
                        std::fs::read_to_string(&path).map_err(|e| TemplateError::MissingFile {
                            path: path.display().to_string(),
                            reason: e.to_string(),
                        })?;
                    let text = text.strip_suffix('\n').unwrap_or(&text);
                    let text = text.strip_suffix('\r').unwrap_or(text);
                    mcpb_redact::register(text);
                    out.push_str(text);
                }
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Literal(s) => f.write_str(s)?,
                Part::Env(name) => write!(f, "${{{name}}}")?,
                Part::SecretFile(name) => write!(f, "${{file:{name}}}")?,
            }
        }
        Ok(())
    }
}

/// Shown as the reference text, so `config show` can never print a secret.
impl Serialize for Template {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Whether a variable or header name looks like it carries a credential.
pub fn looks_like_credential(key: &str) -> bool {
    let k = key.to_ascii_uppercase().replace('-', "_");
    k.ends_with("_KEY")
        || k.ends_with("_TOKEN")
        || k.ends_with("_SECRET")
        || k.contains("PASSWORD")
        || k == "AUTHORIZATION"
        || k == "PROXY_AUTHORIZATION"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips_references() {
        let t = Template::parse("Bearer ${DOCS_TOKEN} and ${file:gh}").unwrap();
        assert!(t.has_reference());
        assert_eq!(t.to_string(), "Bearer ${DOCS_TOKEN} and ${file:gh}");
        assert_eq!(
            Template::parse("${oops").unwrap_err(),
            TemplateError::Unclosed
        );
        assert!(matches!(
            Template::parse("${file:../etc/passwd}"),
            Err(TemplateError::BadReference(_))
        ));
        assert!(!Template::parse("plain $HOME text").unwrap().has_reference());
    }

    #[test]
    fn resolves_env_and_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gh"), "s3cret\n").unwrap();
        let t = Template::parse("a=${A};f=${file:gh}").unwrap();
        let env = |k: &str| (k == "A").then(|| "1".to_string());
        assert_eq!(t.resolve(&env, dir.path()).unwrap(), "a=1;f=s3cret");
        let missing = Template::parse("${NOPE}").unwrap();
        assert_eq!(
            missing.resolve(&env, dir.path()).unwrap_err(),
            TemplateError::MissingEnv("NOPE".into())
        );
    }

    #[test]
    fn credential_names() {
        for k in [
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "DB_PASSWORD",
            "client_secret",
            "Authorization",
            "X-Api-Key",
        ] {
            assert!(looks_like_credential(k), "{k}");
        }
        for k in ["NEWS_LANG", "PATH", "KEYBOARD", "TOKENIZERS_PARALLELISM"] {
            assert!(!looks_like_credential(k), "{k}");
        }
    }
}
