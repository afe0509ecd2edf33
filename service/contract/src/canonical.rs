//! RFC 8785 canonical JSON (the JSON Canonicalization Scheme): one text for one value,
//! whatever the key order and spacing it was written with. Every digest askgate signs
//! or chains (an action's, the answers', an audit record's body) is taken over it, and
//! every SDK computes it alike (`tests/contract/vectors.json`).
//!
//! The general form is `serde_jcs`'s; the values askgate writes itself take a fast
//! path that writes the same text (proven by the proptest below).

use serde_json::{Map, Value};

/// RFC 8785 canonical JSON of `value`.
///
/// Where the value holds no float, no integer past 2^53 and only ASCII keys (every
/// record and receipt askgate writes), serde_json's compact output with each map's
/// keys sorted by their bytes is canonical: byte order is RFC 8785's UTF-16 order for
/// ASCII, integers print alike, and both escape only `"`, `\` and control
/// characters, with the same escapes. That costs a tenth of the general
/// canonicalisation, which every other value takes.
pub fn canonical(value: &Value) -> String {
    if plain(value) {
        let mut out = Vec::with_capacity(128);
        write_value(&mut out, value);
        // serde_json writes UTF-8 only.
        return String::from_utf8(out).unwrap_or_default();
    }
    // A `Value` always serialises: its keys are strings and its numbers finite.
    serde_jcs::to_string(value).unwrap_or_default()
}

/// The entries of `map` by key bytes. serde_json keeps a map's keys sorted, unless a
/// crate of the build turns on its `preserve_order` feature (Cedar's does), which
/// keeps them in insertion order: a digest must not depend on which.
pub fn sorted(map: &Map<String, Value>) -> Sorted<'_> {
    if map.keys().is_sorted() {
        return Sorted::InOrder(map.iter());
    }
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    Sorted::Reordered(entries.into_iter())
}

/// [`sorted`]'s entries: the map's own order when it is sorted already (no copy),
/// else a sorted copy of the references.
pub enum Sorted<'a> {
    InOrder(serde_json::map::Iter<'a>),
    Reordered(std::vec::IntoIter<(&'a String, &'a Value)>),
}

impl<'a> Iterator for Sorted<'a> {
    type Item = (&'a String, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::InOrder(entries) => entries.next(),
            Self::Reordered(entries) => entries.next(),
        }
    }
}

/// Whether `value` holds no float, no integer past 2^53 and no key outside ASCII.
pub fn plain(value: &Value) -> bool {
    match value {
        // Past 2^53 RFC 8785 prints an integer as the double nearest it.
        Value::Number(n) => n
            .as_u64()
            .or(n.as_i64().map(i64::unsigned_abs))
            .is_some_and(|n| n <= 1 << 53),
        Value::Array(items) => items.iter().all(plain),
        Value::Object(map) => map.iter().all(|(k, v)| k.is_ascii() && plain(v)),
        Value::Null | Value::Bool(_) | Value::String(_) => true,
    }
}

/// A [`plain`] `value` as its canonical JSON, onto `out`: each map's keys in byte
/// order, its strings through [`write_str`], everything else as serde_json writes it.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (name, item)) in sorted(map).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, name);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
        // Writing a number, a bool or null into a Vec cannot fail.
        Value::Number(_) | Value::Bool(_) | Value::Null => {
            let _ = serde_json::to_writer(&mut *out, value);
        }
    }
}

/// `text` as a JSON string, onto `out`, escaped as serde_json (and RFC 8785) escape
/// it: most of what a record holds (ids, names, times, labels) needs no escape and is
/// copied whole; anything with a quote, a backslash or a control character takes
/// serde_json's writer.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    // A fold without an early exit, which the compiler may vectorise (an `any` stops
    // at each byte to ask whether it is done).
    let needs_escape = text.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if needs_escape {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
        return;
    }
    out.reserve(text.len() + 2);
    out.push(b'"');
    out.extend_from_slice(text.as_bytes());
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;

    /// serde_json keeps a map in insertion order in these tests (their
    /// `preserve_order`, as Cedar turns it on in the server's build): the text is
    /// the same whatever order the keys came in.
    #[test]
    fn the_key_order_a_map_keeps_changes_nothing() {
        let mut zyx = Map::new();
        for key in ["z", "service", "env", "a"] {
            zyx.insert(key.to_owned(), json!({"b": 1, "a": [key]}));
        }
        assert_eq!(
            zyx.keys().next().map(String::as_str),
            Some("z"),
            "insertion order"
        );
        let text = canonical(&Value::Object(zyx));
        assert_eq!(
            text,
            r#"{"a":{"a":["a"],"b":1},"env":{"a":["env"],"b":1},"service":{"a":["service"],"b":1},"z":{"a":["z"],"b":1}}"#
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// The fast path writes what RFC 8785 writes, whatever the strings hold.
        #[test]
        fn the_plain_path_is_canonical(
            keys in proptest::collection::vec("[ -~]{0,8}", 0..6),
            texts in proptest::collection::vec("\\PC{0,12}|[\u{0}-\u{1f}\u{7f}\u{2028}\"\\\\/]{0,4}", 0..6),
            number in -(1i64 << 53)..=(1i64 << 53),
            big in (1i64 << 53) + 1..=i64::MAX,
        ) {
            let mut map = Map::new();
            for (k, t) in keys.iter().zip(texts.iter().cycle()) {
                map.insert(k.clone(), json!([t, number, {"z": t, "a": null, "m": true}]));
            }
            let value = Value::Object(map);
            proptest::prop_assert!(plain(&value));
            proptest::prop_assert_eq!(
                canonical(&value),
                serde_jcs::to_string(&value).expect("serialises")
            );
            let mut written = Vec::new();
            write_value(&mut written, &value);
            proptest::prop_assert_eq!(String::from_utf8(written).expect("UTF-8"), canonical(&value));
            // An integer past 2^53 takes the general path, which prints it as RFC 8785 does.
            let big = json!({"n": big});
            proptest::prop_assert!(!plain(&big));
            proptest::prop_assert_eq!(canonical(&big), serde_jcs::to_string(&big).expect("serialises"));
        }
    }
}
