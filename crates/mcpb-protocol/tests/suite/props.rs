//! Property tests of the wire layer, bounded so the whole file runs in seconds: the frame
//! reader against any bytes in any chunking, message parsing against any bytes, ids that come
//! back as they went out, call rewriting that keeps what it must, and the JSON text check.
//! Cases proptest finds are kept in `proptest-regressions/` and replayed first.

use mcpb_protocol::codec::{FrameError, FrameReader};
use mcpb_protocol::json::{MAX_DEPTH, check_text};
use mcpb_protocol::message::{Incoming, response_line};
use mcpb_protocol::rewrite::rewrite_call;
use proptest::prelude::*;
use serde_json::Value;
use serde_json::value::RawValue;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    }
}

/// What a newline-framed reader must return for `lines` (each ended by a LF): each non-empty
/// line, its trailing CRs dropped, of at most `limit` bytes; a longer one is refused, and so is
/// one whose raw bytes pass `limit` plus a CRLF (the reader never buffers more).
fn expected(lines: &[Vec<u8>], limit: usize) -> Vec<Result<Vec<u8>, ()>> {
    lines
        .iter()
        .filter_map(|l| {
            let mut end = l.len();
            while end > 0 && l[end - 1] == b'\r' {
                end -= 1;
            }
            if l.len() + 1 > limit + 2 {
                Some(Err(()))
            } else if end == 0 {
                None
            } else if end > limit {
                Some(Err(()))
            } else {
                Some(Ok(l[..end].to_vec()))
            }
        })
        .collect()
}

fn read_all(data: &[u8], chunk: usize, limit: usize) -> Vec<Result<Vec<u8>, ()>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let inner = tokio::io::BufReader::with_capacity(chunk, data);
        let mut r = FrameReader::new(inner, limit);
        let mut out = Vec::new();
        loop {
            match r.next_frame().await {
                Ok(Some(f)) => out.push(Ok(f.to_vec())),
                Ok(None) => return out,
                Err(FrameError::TooLarge { .. }) => {
                    out.push(Err(()));
                    if !r.skip_rest_of_line().await.unwrap() {
                        return out;
                    }
                }
                Err(FrameError::Io(e)) => panic!("{e}"),
            }
        }
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn frames_are_the_lines_under_the_cap_whatever_the_chunking(
        lines in prop::collection::vec(
            prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..80),
            0..12,
        ),
        chunk in 1usize..64,
        limit in 1usize..64,
    ) {
        let mut data = lines.join(&b'\n');
        data.push(b'\n');
        prop_assert_eq!(read_all(&data, chunk, limit), expected(&lines, limit));
    }

    #[test]
    fn any_bytes_parse_or_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Incoming::parse(&bytes).map(|m| m.kind());
    }

    #[test]
    fn any_json_text_parses_or_fails_cleanly(text in any::<String>()) {
        let framed = format!("{{\"jsonrpc\":\"2.0\",\"id\":{text},\"method\":\"m\"}}");
        let _ = Incoming::parse(framed.as_bytes()).map(|m| m.kind());
    }

    #[test]
    fn an_id_comes_back_exactly_as_it_went_out(
        id in prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ],
    ) {
        let frame = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string();
        let msg = Incoming::parse(frame.as_bytes()).unwrap();
        let raw_id = msg.id.unwrap();
        let result = RawValue::from_string("{}".into()).unwrap();
        let line = response_line(raw_id, &result);
        let back: Value = serde_json::from_slice(&line).unwrap();
        prop_assert_eq!(&back["id"], &id);
    }

    #[test]
    fn a_rewritten_call_carries_the_new_name_and_token_and_gives_back_the_clients(
        name in any::<String>(),
        token in any::<String>(),
        client_token in prop::option::of(any::<u32>()),
        extra in prop::collection::btree_map("[a-z]{1,6}", any::<i32>(), 0..4),
    ) {
        let mut meta = serde_json::Map::new();
        if let Some(t) = client_token {
            meta.insert("progressToken".into(), Value::from(t));
        }
        for (k, v) in &extra {
            meta.insert(k.clone(), Value::from(*v));
        }
        let params = serde_json::json!({"name": "old", "arguments": {"a": 1}, "_meta": meta});
        let raw = RawValue::from_string(params.to_string()).unwrap();
        let (out, given_back) = rewrite_call(&raw, &name, || token.clone(), &[], &[]).unwrap();
        let out: Value = serde_json::from_str(&out).unwrap();
        prop_assert_eq!(&out["name"], &Value::from(name));
        prop_assert_eq!(&out["arguments"], &serde_json::json!({"a": 1}));
        match client_token {
            Some(t) => {
                prop_assert_eq!(&out["_meta"]["progressToken"], &Value::from(token));
                let back = given_back.unwrap();
                prop_assert_eq!(back.get(), t.to_string());
            }
            None => prop_assert!(given_back.is_none()),
        }
        // Keys the operator did not allow never travel on.
        for k in extra.keys() {
            prop_assert!(out["_meta"].get(k).is_none());
        }
    }

    #[test]
    fn nesting_is_refused_exactly_past_the_limit(depth in 1usize..300, object in any::<bool>()) {
        let (open, close) = if object { ("{\"a\":", "}") } else { ("[", "]") };
        let text = format!("{}1{}", open.repeat(depth), close.repeat(depth));
        prop_assert_eq!(check_text(&text).is_ok(), depth <= MAX_DEPTH);
    }

    #[test]
    fn the_text_check_agrees_with_a_full_parse_on_strings(s in any::<String>()) {
        // Any Rust string is text: its JSON form always passes.
        let text = serde_json::to_string(&s).unwrap();
        prop_assert!(check_text(&text).is_ok());
    }
}
