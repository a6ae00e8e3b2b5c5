use super::*;

fn doc(server: &str, name: &str, description: &str, params: &[&str]) -> ToolDoc {
    ToolDoc {
        id: format!("{server}.{name}"),
        server: server.into(),
        name: name.into(),
        description: description.into(),
        params: params.iter().map(|p| p.to_string()).collect(),
        param_text: String::new(),
        server_text: String::new(),
    }
}

#[test]
fn static_embeddings_find_a_tool_that_shares_no_word_with_the_request() {
    let docs = vec![
        doc(
            "rentals",
            "find_listings",
            "Search vacation rentals and hotel rooms",
            &["city"],
        ),
        doc(
            "git",
            "git_status",
            "Show the working tree status",
            &["repo_path"],
        ),
        doc(
            "weather",
            "forecast",
            "Weather forecast for a city",
            &["city"],
        ),
    ];
    let query = "somewhere to sleep tonight";
    let words = Index::build(&docs, Weights::broker());
    assert!(words.search(query, 5, &|_| true).is_empty());
    let hybrid = Index::build(
        &docs,
        Weights {
            dense: STATIC_WEIGHT,
            ..Weights::broker()
        },
    );
    let hits = hybrid.search(query, 5, &|_| true);
    assert_eq!(hits[0].doc, 0, "{hits:?}");
    // `keep` still decides: a filtered tool is never a candidate.
    let kept = hybrid.search(query, 5, &|d| d != 0);
    assert!(
        kept.iter().all(|h| h.doc != 0) && kept.len() == 2,
        "{kept:?}"
    );
    // Words still lead where they match.
    assert_eq!(hybrid.search("git status", 1, &|_| true)[0].doc, 1);
    // A request the model knows no word of matches nothing, as with words alone.
    for nothing in ["😀😀😀", "\u{200b}\u{200b}\u{200b}", "", "  "] {
        assert!(
            hybrid.search(nothing, 5, &|_| true).is_empty(),
            "{nothing:?}"
        );
    }
}

#[test]
fn finds_by_name_parts_and_description() {
    let docs = vec![
        doc("fs", "read_text_file", "Read a file as text", &["path"]),
        doc(
            "fs",
            "list_directory",
            "List entries of a directory",
            &["path"],
        ),
        doc(
            "time",
            "get_current_time",
            "Current time in a timezone",
            &["timezone"],
        ),
    ];
    let index = Index::build(&docs, Weights::broker());
    let hits = index.search("what time is it in Paris timezone", 3, &|_| true);
    assert_eq!(hits[0].doc, 2);
    let hits = index.search("show the files in a folder directory", 3, &|_| true);
    assert_eq!(hits[0].doc, 1);
    let hits = index.search("readTextFile", 3, &|_| true);
    assert_eq!(hits[0].doc, 0);
    let only_fs = index.search("time file directory", 5, &|d| docs[d].server == "fs");
    assert!(only_fs.iter().all(|h| docs[h.doc].server == "fs"));
}

#[test]
fn request_words_reach_the_words_tools_use() {
    let docs = vec![
        doc(
            "fs",
            "write_file",
            "Write content to a file",
            &["path", "content"],
        ),
        doc("fs", "read_file", "Read a file", &["path"]),
        doc("web", "fetch", "Fetch a URL", &["url"]),
    ];
    let index = Index::build(&docs, Weights::broker());
    assert_eq!(
        docs[index.search("save my notes", 3, &|_| true)[0].doc].name,
        "write_file"
    );
    assert_eq!(
        docs[index.search("download this webpage", 3, &|_| true)[0].doc].name,
        "fetch"
    );
    // With no related word weight the plain query finds nothing for "save".
    let plain = Index::build(
        &docs,
        Weights {
            related: 0.0,
            ..Weights::broker()
        },
    );
    assert!(plain.search("save my notes", 3, &|_| true).is_empty());
}

#[test]
fn a_path_after_save_means_writing_a_file_and_siblings_follow() {
    let docs = vec![
        doc(
            "fs",
            "write_file",
            "Create or overwrite a file",
            &["path", "content"],
        ),
        doc("fs", "read_file", "Read a file", &["path"]),
        doc(
            "ppt",
            "save_presentation",
            "Save the presentation",
            &["name"],
        ),
        doc(
            "crypto",
            "research",
            "Research a coin and report on it",
            &["coin"],
        ),
        doc("crypto", "coin_list", "List known coins", &[]),
    ];
    let index = Index::build(&docs, Weights::broker());
    let hits = index.search(
        "write a report on bitcoin and save it to /tmp/out/report.md",
        5,
        &|_| true,
    );
    let names: Vec<&str> = hits.iter().map(|h| docs[h.doc].name.as_str()).collect();
    assert_eq!(names[0], "write_file", "{names:?}");
    assert!(
        names.contains(&"coin_list"),
        "a sibling of a match joins: {names:?}"
    );
    let read = index.search("what is in /tmp/in/data.txt, read it", 1, &|_| true);
    assert_eq!(docs[read[0].doc].name, "read_file");
}

#[test]
fn an_upstream_name_does_not_drown_better_matches() {
    let mut docs = vec![doc(
        "github",
        "search_repositories",
        "Search GitHub repositories",
        &["query"],
    )];
    for i in 0..20 {
        docs.push(doc(
            "github",
            &format!("tool_{i}"),
            "Does something with github",
            &[],
        ));
    }
    docs.push(doc(
        "web",
        "fetch_url",
        "Fetch a URL and return its content",
        &["url"],
    ));
    let index = Index::build(&docs, Weights::broker());
    let hits = index.search("fetch the content of a url from github", 3, &|_| true);
    assert_eq!(docs[hits[0].doc].name, "fetch_url");
}
