//! Tests of the SDK channel: frames, the budget, and what the program is answered.

use super::*;

async fn lines(data: &[u8], max: usize, budget: &FrameBudget) -> Vec<Result<String, String>> {
    let r = tokio::io::BufReader::with_capacity(64, data);
    let mut reader = FrameReader::new(r, max, budget);
    let mut out = Vec::new();
    loop {
        match reader.next().await {
            Ok(Some(Incoming::Line(l, _))) => out.push(Ok(String::from_utf8(l).unwrap())),
            Ok(Some(Incoming::OverBudget { id, bytes })) => {
                out.push(Err(format!("over {id} {bytes}")));
            }
            Ok(None) => return out,
            Err(e) => {
                out.push(Err(format!("{e:?}")));
                return out;
            }
        }
    }
}

#[tokio::test]
async fn frames_are_lines_under_a_cap() {
    let budget = FrameBudget::new(64 << 20);
    let got = lines(b"{\"a\":1}\n{\"b\":2}\npartial", 100, &budget).await;
    assert_eq!(got, vec![Ok("{\"a\":1}".into()), Ok("{\"b\":2}".into())]);
    let got = lines(&[b'x'; 1000], 100, &budget).await;
    assert_eq!(got, vec![Err("TooLarge".into())]);
    assert_eq!(budget.available(), 64 << 20, "all given back");
}

#[tokio::test]
async fn a_frame_over_the_budget_is_read_to_its_end_and_refused_with_its_id() {
    let budget = FrameBudget::new(2 << 20);
    let mut big = br#"{"id":7,"method":"result","params":{"value":""#.to_vec();
    big.extend(std::iter::repeat_n(b'0', 3 << 20));
    big.extend_from_slice(b"\"}}\n{\"id\":8,\"method\":\"x\"}\n");
    let got = lines(&big, 16 << 20, &budget).await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].as_ref().unwrap_err().starts_with("over 7 "),
        "{got:?}"
    );
    assert_eq!(got[1].as_deref(), Ok("{\"id\":8,\"method\":\"x\"}"));
    assert_eq!(budget.available(), 2 << 20);
}

#[tokio::test]
async fn a_kept_frame_holds_its_bytes_until_dropped() {
    let budget = FrameBudget::new(8 << 20);
    let mut frame = br#"{"id":1,"method":"result","params":{"value":""#.to_vec();
    frame.extend(std::iter::repeat_n(b'0', 3 << 20));
    frame.extend_from_slice(b"\"}}\n");
    let r = tokio::io::BufReader::new(frame.as_slice());
    let mut reader = FrameReader::new(r, 16 << 20, &budget);
    let Some(Incoming::Line(line, held)) = reader.next().await.unwrap() else {
        panic!("a line")
    };
    assert_eq!(budget.available(), 4 << 20);
    let mut calls = test_calls();
    let host = NoHost;
    assert!(matches!(calls.handle(&line, held, &host), Step::Answer(_)));
    drop(line);
    assert_eq!(calls.result.as_ref().unwrap().0.get().len(), (3 << 20) + 2);
    assert_eq!(budget.available(), 4 << 20, "the result keeps its hold");
    calls.result = None;
    assert_eq!(budget.available(), 8 << 20);
}

struct NoHost;
impl ToolHost for NoHost {
    fn call<'a>(&'a self, _: &'a str, _: Box<RawValue>, _: bool) -> BoxFuture<'a, CallOutcome> {
        Box::pin(async { CallOutcome::Unknown })
    }
    fn save_artifact(&self, _: &str) -> Result<String, String> {
        Err("none".into())
    }
}

fn test_calls() -> Calls {
    Calls {
        allow: vec![glob::Pattern::new("*").unwrap()],
        read_only: false,
        max_calls: 5,
        max_concurrent: 1,
        per_call: Duration::from_secs(1),
        made: 0,
        in_flight: 0,
        limit_hit: None,
        result: None,
        artifacts: Vec::new(),
        artifact_bytes_left: 1 << 20,
        records: Vec::new(),
        unlisted: 0,
        refused: 0,
    }
}

#[test]
fn the_snippet_gets_structured_then_json_then_text() {
    let structured =
        json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1}});
    assert_eq!(sdk_value(&structured).unwrap(), json!({"a": 1}));
    let json_text = json!({"content": [{"type": "text", "text": "[1,2]"}]});
    assert_eq!(sdk_value(&json_text).unwrap(), json!([1, 2]));
    let text = json!({"content": [{"type": "text", "text": "hello"}]});
    assert_eq!(sdk_value(&text).unwrap(), json!("hello"));
    let err = json!({"content": [{"type": "text", "text": "no such file"}], "isError": true});
    assert_eq!(sdk_value(&err).unwrap_err(), "no such file");
}

mod props {
    use proptest::prelude::*;

    use super::*;

    /// Frames a program could send: well-formed ones of every method, and fragments.
    const PIECES: &[&str] = &[
        r#"{"id":1,"method":"call_tool","params":{"name":"t.echo","arguments":{"a":1}}}"#,
        r#"{"id":2,"method":"result","params":{"value":[1,2,3]}}"#,
        r#"{"id":3,"method":"save_artifact","params":{"name":"n","text":"hello"}}"#,
        r#"{"id":4,"method":"save_artifact","params":{"base64":"!!"}}"#,
        r#"{"id":"x","method":"nope"}"#,
        r#"{"id":5,"method":"call_tool","params":{"name":7,"arguments":[1]}}"#,
        r#"{"id":6,"method":"result","params":{"value":"\ud800"}}"#,
        r#"{"id":[1,2],"method":"result","params":null}"#,
        r#"{"method":"call_tool"}"#,
        "{\"id\":7,",
        "not json",
        "[[[[[[[[[[",
        "\u{0}\u{1b}",
        "",
    ];

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: 100,
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        /// Any bytes in any chunking, under a small budget: the reader and the handler answer
        /// or refuse, never panic, and every byte taken from the budget is given back.
        #[test]
        fn any_frames_are_answered_and_the_budget_comes_back(
            pieces in prop::collection::vec(prop::sample::select(PIECES), 0..20),
            noise in prop::collection::vec(any::<u8>(), 0..200),
            big in 0usize..(3 << 20),
            chunk in 1usize..4096,
        ) {
            let mut data: Vec<u8> = pieces.join("\n").into_bytes();
            data.push(b'\n');
            data.extend_from_slice(&noise);
            data.push(b'\n');
            data.extend_from_slice(br#"{"id":9,"method":"result","params":{"value":""#);
            data.extend(std::iter::repeat_n(b'0', big));
            data.extend_from_slice(b"\"}}\n");
            let budget = FrameBudget::new(2 << 20);
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let r = tokio::io::BufReader::with_capacity(chunk, data.as_slice());
                let mut reader = FrameReader::new(r, 16 << 20, &budget);
                let mut calls = test_calls();
                let host = NoHost;
                while let Ok(Some(incoming)) = reader.next().await {
                    let step = match incoming {
                        Incoming::Line(line, held) => calls.handle(&line, held, &host),
                        Incoming::OverBudget { id, bytes } => calls.over_budget(&id, bytes, 0),
                    };
                    match step {
                        Step::Answer(line) => {
                            let v: Value = serde_json::from_slice(&line).unwrap();
                            assert!(v.get("id").is_some(), "{v}");
                        }
                        Step::Call(fut) => {
                            let (line, _) = fut.await;
                            assert!(serde_json::from_slice::<Value>(&line).is_ok());
                        }
                        Step::Abuse(_) => break,
                    }
                }
                drop(calls);
            });
            prop_assert_eq!(budget.available(), 2 << 20);
        }
    }
}
