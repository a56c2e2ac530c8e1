//! relay-core's modules depend one way: ARCHITECTURE.md lists them in layers, top first, and a
//! module may name only modules in the layers below its own. This test reads the layers from
//! ARCHITECTURE.md and every `crate::…` path in relay-core's code (its `use` lines and paths
//! written in place; tests excluded), and fails on each edge against the direction.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const START: &str = "<!-- layers:start -->";
const END: &str = "<!-- layers:end -->";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Each module's layer, 0 at the top.
fn layers(architecture: &str) -> BTreeMap<String, usize> {
    let start = architecture
        .find(START)
        .expect("ARCHITECTURE.md has the layers start marker");
    let end = architecture
        .find(END)
        .expect("ARCHITECTURE.md has the layers end marker");
    let mut layers = BTreeMap::new();
    let lines = architecture[start + START.len()..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("```"));
    for (depth, line) in lines.enumerate() {
        for module in line.split_whitespace() {
            let earlier = layers.insert(module.to_owned(), depth);
            assert!(
                earlier.is_none(),
                "{module} is listed twice in ARCHITECTURE.md's layers"
            );
        }
    }
    layers
}

/// The code of a file before its tests, without line comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a readable source file");
    let mut code = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let line = line.split("//").next().unwrap_or_default();
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The top-level modules a piece of code names: `crate::a::…` and `crate::{a, b::c}`.
fn named_modules(code: &str) -> Vec<String> {
    let mut named = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut items = Vec::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => items.push(std::mem::take(&mut item)),
                    _ if depth == 1 => item.push(c),
                    _ => {}
                }
            }
            items.push(item);
            named.extend(items.iter().filter_map(|i| first_ident(i.trim())));
        } else {
            named.extend(first_ident(rest));
        }
    }
    named
}

fn first_ident(text: &str) -> Option<String> {
    let ident: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!ident.is_empty() && ident != "self").then_some(ident)
}

/// Every `.rs` file under `dir`, with its top-level module (`sink` for `sink/sqs.rs`).
fn sources(dir: &Path, top: Option<&str>, out: &mut Vec<(String, PathBuf)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a readable folder")
        .map(|e| e.expect("a folder entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_stem()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if path.is_dir() {
            sources(&path, Some(top.unwrap_or(&name)), out);
        } else if path.extension().is_some_and(|e| e == "rs") && name != "tests" {
            let module = top.map_or(name, str::to_owned);
            if module != "lib" {
                out.push((module, path));
            }
        }
    }
}

/// The edges of relay-core against ARCHITECTURE.md's layers, as lines to print.
fn edges_against_the_layers() -> Vec<String> {
    let root = repository();
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let layers = layers(&architecture);
    let mut files = Vec::new();
    sources(&root.join("crates/relay-core/src"), None, &mut files);
    let mut wrong = Vec::new();
    for (module, path) in &files {
        let shown = path.strip_prefix(&root).unwrap_or(path).display();
        let Some(&own) = layers.get(module) else {
            wrong.push(format!(
                "{shown}: module {module} is in no layer of ARCHITECTURE.md"
            ));
            continue;
        };
        for named in named_modules(&code(path)) {
            match layers.get(&named) {
                _ if named == *module => {}
                Some(&layer) if layer > own => {}
                Some(_) => wrong.push(format!(
                    "{shown}: {module} uses {named}, a layer not below its own"
                )),
                None => wrong.push(format!("{shown}: uses {named}, which is in no layer")),
            }
        }
    }
    wrong
}

#[test]
fn relay_core_depends_one_way() {
    let wrong = edges_against_the_layers();
    assert!(
        wrong.is_empty(),
        "imports against ARCHITECTURE.md's layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_sees_every_form_of_path() {
    let code = "use crate::sink::{Sink, Message};\nuse crate::{config::Config, relay};\nlet x = crate::verify::sign(a);\nuse crate::{self as c};";
    assert_eq!(named_modules(code), ["sink", "config", "relay", "verify"]);
    let layers = layers("<!-- layers:start -->\n```\nrelay\nconfig sink\n```\n<!-- layers:end -->");
    assert_eq!(layers["relay"], 0);
    assert_eq!((layers["config"], layers["sink"]), (1, 1));
}
