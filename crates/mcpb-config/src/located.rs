//! A value that remembers where in the YAML file it was written, so semantic checks that run after
//! parsing can still point at `file:line:col`.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone)]
pub struct Located<T> {
    pub value: T,
    /// 1-based; 0 when the value did not come from a file.
    pub line: u64,
    pub column: u64,
}

impl<T> Located<T> {
    pub fn unplaced(value: T) -> Self {
        Self {
            value,
            line: 0,
            column: 0,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<T>::deserialize(d)?;
        Ok(Self {
            value: spanned.value,
            line: spanned.referenced.line(),
            column: spanned.referenced.column(),
        })
    }
}

impl<T: Serialize> Serialize for Located<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for Located<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }
}

impl<T: PartialEq> PartialEq for Located<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}
impl<T: Eq> Eq for Located<T> {}
impl<T: PartialOrd> PartialOrd for Located<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.value.partial_cmp(&other.value)
    }
}
impl<T: Ord> Ord for Located<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.value.cmp(&other.value)
    }
}
impl<T: Hash> Hash for Located<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.value.hash(state)
    }
}

impl<T> std::ops::Deref for Located<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;

    /// Map keys are compared, ordered and hashed by value: the same name written twice at two
    /// places is one key.
    #[test]
    fn a_place_in_the_file_is_not_part_of_the_value() {
        use std::collections::hash_map::DefaultHasher;
        let at = |value: &str, line| Located {
            value: value.to_string(),
            line,
            column: 3,
        };
        assert_eq!(at("gh", 2), at("gh", 9));
        assert_ne!(at("gh", 2), at("fs", 2));
        assert_eq!(at("a", 9).partial_cmp(&at("b", 1)), Some(Ordering::Less));
        assert_eq!(at("b", 1).cmp(&at("a", 9)), Ordering::Greater);
        let hash = |l: &Located<String>| {
            let mut h = DefaultHasher::new();
            l.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&at("gh", 2)), hash(&at("gh", 9)));
        assert_ne!(hash(&at("gh", 2)), hash(&at("fs", 2)));
    }

    /// The schema of a located value is its value's, named and shared the same way.
    #[test]
    fn a_located_value_has_its_values_schema() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Entry {
            name: String,
        }
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Holder {
            a: Located<Entry>,
            b: Entry,
        }
        assert_eq!(Located::<Entry>::schema_name(), "Entry");
        assert_eq!(Located::<Entry>::schema_id(), Entry::schema_id());
        assert!(!Located::<Entry>::inline_schema());
        let schema = serde_json::to_value(schemars::schema_for!(Holder)).unwrap();
        assert_eq!(schema["properties"]["a"], schema["properties"]["b"]);
        assert_eq!(schema["$defs"].as_object().unwrap().len(), 1, "{schema}");
    }
}
