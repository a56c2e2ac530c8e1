//! The error codes the documentation names are ones the relay answers with: every code span in
//! the repository's Markdown that reads like a code of relay-core's answers (a near miss of
//! one, such as `unknown_key` for `unknown_key_id`, or a snake_case span in a list of codes) is
//! one that the `code()` methods of relay-core's errors return.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use super::docs::{ROOT, markdown_files};

/// The files whose errors' `code()` make up the codes of the relay's answers.
const CODE_SOURCES: [&str; 5] = [
    "crates/relay-core/src/schemes/mod.rs",
    "crates/relay-core/src/error.rs",
    "crates/relay-core/src/verify.rs",
    "crates/relay-core/src/intake.rs",
    "crates/relay-core/src/notification.rs",
];

/// Snake_case code spans that may share a line with error codes without being one, besides the
/// relay's settings and the Terraform inputs and outputs: the notification's fields, and the
/// keys of a `[sources.<name>]` table.
const NOT_CODES: [&str; 12] = [
    "subscription_id",
    "event_type",
    "transaction_id",
    "secret_env",
    "secret_file",
    "secret_arn",
    "window_secs",
    "dedup_key",
    "event_type_field",
    "timestamp_header",
    "id_header",
    "event_type_header",
];

/// The string literals the `fn code(&self) -> &'static str` bodies of `text` return.
fn codes_in(text: &str) -> Vec<String> {
    let mut codes = Vec::new();
    for body in text.split("fn code(&self) -> &'static str {").skip(1) {
        let end = body.find("\n    }\n").unwrap_or(body.len());
        for (i, part) in body[..end].split('"').enumerate() {
            if i % 2 == 1 && is_snake(part) {
                codes.push(part.to_owned());
            }
        }
    }
    codes
}

/// Lowercase words joined by underscores, two words at least.
fn is_snake(s: &str) -> bool {
    s.contains('_')
        && !s.starts_with('_')
        && !s.ends_with('_')
        && !s.contains("__")
        && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

/// Every code the relay answers with.
fn known_codes() -> BTreeSet<String> {
    let root = Path::new(ROOT);
    let mut codes = BTreeSet::new();
    for file in CODE_SOURCES {
        let text = fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let found = codes_in(&text);
        assert!(!found.is_empty(), "{file}: no fn code() found");
        codes.extend(found);
    }
    codes
}

/// Names the documentation uses that are not error codes: the relay's settings (their file
/// keys), every Terraform variable and output under terraform/, and [`NOT_CODES`].
fn other_names() -> BTreeSet<String> {
    let mut names: BTreeSet<String> = NOT_CODES.iter().map(|n| (*n).to_owned()).collect();
    names.extend(
        relay_core::config::SETTINGS
            .iter()
            .map(|s| s.key.to_owned()),
    );
    let mut dirs = vec![Path::new(ROOT).join("terraform")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "tf") {
                let text = fs::read_to_string(&path).unwrap_or_default();
                for line in text.lines() {
                    for kind in ["variable \"", "output \""] {
                        if let Some(rest) = line.strip_prefix(kind) {
                            names.extend(rest.split('"').next().map(str::to_owned));
                        }
                    }
                }
            }
        }
    }
    names
}

/// The inline code spans of each line outside fenced blocks, by line number.
fn code_spans(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let spans: Vec<String> = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s.trim().to_owned())
            .collect();
        out.push((index + 1, spans));
    }
    out
}

/// What is wrong with the codes named on one line: near misses of a known code anywhere, and
/// unknown snake_case spans on a line that names a known code.
fn problems(spans: &[String], known: &BTreeSet<String>, others: &BTreeSet<String>) -> Vec<String> {
    let lists_codes = spans.iter().any(|s| known.contains(s));
    let mut found = Vec::new();
    let strangers = spans
        .iter()
        .filter(|s| is_snake(s) && !known.contains(*s) && !others.contains(*s));
    for span in strangers {
        let near = known.iter().find(|code| {
            code.starts_with(&format!("{span}_")) || span.starts_with(&format!("{code}_"))
        });
        if let Some(code) = near {
            found.push(format!(
                "`{span}` is no error code (did you mean `{code}`?)"
            ));
        } else if lists_codes {
            found.push(format!("`{span}`, next to error codes, is no error code"));
        }
    }
    found
}

#[test]
fn every_error_code_the_docs_name_exists() {
    let root = Path::new(ROOT);
    let known = known_codes();
    let others = other_names();
    assert!(others.contains("body_timeout_ms") && others.contains("hmac_key_id"));
    assert!(known.contains("unknown_key_id") && known.contains("sink_failed"));
    let mut wrong = Vec::new();
    for file in markdown_files(root) {
        let text = fs::read_to_string(root.join(&file)).unwrap_or_default();
        for (line, spans) in code_spans(&text) {
            for problem in problems(&spans, &known, &others) {
                wrong.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    let report = wrong.join("\n");
    assert!(
        wrong.is_empty(),
        "error codes the relay never answers with:\n{report}"
    );
}

#[test]
fn near_misses_and_strangers_in_code_lists_are_found() {
    let known: BTreeSet<String> = ["unknown_key_id", "bad_signature"]
        .map(str::to_owned)
        .into();
    let others: BTreeSet<String> = ["hmac_key_id"].map(str::to_owned).into();
    let spans = |line: &str| code_spans(line).remove(0).1;
    assert_eq!(
        problems(&spans("401 `bad_signature`/`unknown_key`"), &known, &others),
        ["`unknown_key` is no error code (did you mean `unknown_key_id`?)"]
    );
    assert_eq!(
        problems(&spans("`bad_signature` or `wrong_key`"), &known, &others),
        ["`wrong_key`, next to error codes, is no error code"]
    );
    assert!(
        problems(
            &spans("`bad_signature` or `unknown_key_id`"),
            &known,
            &others
        )
        .is_empty()
    );
    assert!(
        problems(
            &spans("set `split_prefix` and `alarm_actions`"),
            &known,
            &others
        )
        .is_empty()
    );
    assert!(
        problems(
            &spans("`bad_signature` with `hmac_key_id`"),
            &known,
            &others
        )
        .is_empty()
    );
    assert_eq!(
        codes_in("pub fn code(&self) -> &'static str {\n Self::A => \"a_b\",\n    }\n\"c_d\""),
        ["a_b"]
    );
}
