//! relay-core's modules depend one way: ARCHITECTURE.md lists them in layers, top first, and a
//! module may name only modules in the layers below its own. This test reads the layers from
//! ARCHITECTURE.md and every `crate::…` path in relay-core's code (its `use` lines and paths
//! written in place; the items `#[cfg(test)]` marks left out, and the code after them read), and
//! fails on each edge against the direction.

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

/// The code of a file without its test items (`#[cfg(test)]` and what it marks, a module's
/// braces matched) and without line comments: what comes after a test module is read too.
fn code(path: &Path) -> String {
    code_of(&std::fs::read_to_string(path).expect("a readable source file"))
}

fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.split("//").next().unwrap_or_default();
        let Some(rest) = line.trim_start().strip_prefix("#[cfg(test)]") else {
            code.push_str(line);
            code.push('\n');
            continue;
        };
        // Skip the marked item: up to its `;`, or through its braces.
        let mut depth = 0usize;
        let mut opened = false;
        // The item starts on the attribute's line when something follows it there.
        for line in std::iter::once(rest).chain(lines.by_ref()) {
            let line = line.split("//").next().unwrap_or_default();
            for c in braces(line) {
                opened = true;
                match c {
                    '{' => depth += 1,
                    _ => depth = depth.saturating_sub(1),
                }
            }
            if (opened && depth == 0) || (!opened && line.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    code
}

/// The braces of a line of code, outside string and character literals.
fn braces(line: &str) -> impl Iterator<Item = char> + '_ {
    let mut in_string = false;
    let mut escaped = false;
    line.chars().filter(move |&c| {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => in_string = !in_string,
            (false, _, '{' | '}') => return true,
            _ => {}
        }
        false
    })
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
fn an_edge_after_a_test_module_is_seen_and_the_test_module_is_not() {
    let text = "use crate::text::parse;\n\n#[cfg(test)]\nmod tests {\n    use crate::relay::Relay;\n    fn f() { let s = \"}\"; }\n}\n\npub fn late() { crate::bootstrap::start(); }\n#[cfg(test)]\nmod more;\n#[cfg(test)] use crate::live::x;\nuse crate::archive::Record;\n";
    assert_eq!(
        named_modules(&code_of(text)),
        ["text", "bootstrap", "archive"],
        "the test module's relay is left out; what follows it is read"
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

/// ARCHITECTURE.md's "only verified notifications are published": `Verified` has one maker,
/// and production code calls it only where a request is checked and where an archived record
/// (checked when it arrived) is reopened.
#[test]
fn only_checks_and_the_archive_make_a_verified() {
    let root = repository().join("crates/relay-core/src");
    let mut files = Vec::new();
    sources(&root, None, &mut files);
    let makers: Vec<String> = files
        .iter()
        .filter(|(_, path)| code(path).contains("Verified::new("))
        .map(|(_, path)| path.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert_eq!(
        makers,
        ["relay/refused.rs", "relay/replay.rs", "source/open.rs"]
    );
}
