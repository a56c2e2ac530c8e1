//! Size is part of the design: in `crates/*/src`, no file is over 500 lines before its tests and
//! no function is over 80 lines, test code aside. This test parses every such file and counts
//! what is not marked `#[cfg(test)]`.

use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// The most lines a file may have, its test items left out.
const FILE_LINES: usize = 500;
/// The most lines a function may have, from `fn` to its closing brace.
const FUNCTION_LINES: usize = 80;

pub(crate) fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(crate) fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `.rs` file under `crates/*/src`.
fn crate_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(repository().join("crates")).expect("crates/") {
        let src = krate.expect("a crate folder").path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    files.sort();
    files
}

pub(crate) fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn lines(span: proc_macro2::Span) -> usize {
    span.end().line - span.start().line + 1
}

/// What one file holds: its lines in test items, its functions outside them, and the names of
/// the test modules it keeps in files of their own (`#[cfg(test)] mod tests;`).
#[derive(Default)]
struct Sizes {
    test_lines: usize,
    functions: Vec<(String, usize)>,
    test_files: Vec<String>,
}

impl Sizes {
    fn function(&mut self, name: &syn::Ident, fn_token: proc_macro2::Span, body: &syn::Block) {
        let n = body.span().end().line - fn_token.start().line + 1;
        self.functions.push((name.to_string(), n));
    }
}

impl<'ast> Visit<'ast> for Sizes {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            self.test_lines += lines(item.span());
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                self.test_files.push(m.ident.to_string());
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.function(&f.sig.ident, f.sig.fn_token.span, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        self.function(&f.sig.ident, f.sig.fn_token.span, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.function(&f.sig.ident, f.sig.fn_token.span, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

fn sizes(text: &str) -> (usize, Sizes) {
    let file = syn::parse_file(text).expect("a file that parses");
    let mut sizes = Sizes::default();
    sizes.visit_file(&file);
    (text.lines().count() - sizes.test_lines, sizes)
}

/// Where the module `name`, declared in `file` without a body, is written.
fn module_file(file: &Path, name: &str) -> PathBuf {
    let dir = file.parent().expect("a file in a folder");
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    match stem {
        "mod" | "lib" | "main" => dir.join(format!("{name}.rs")),
        _ => dir.join(stem).join(format!("{name}.rs")),
    }
}

#[test]
fn no_file_or_function_is_over_its_size() {
    let root = repository();
    let files = crate_sources();
    assert!(files.len() > 50, "crates/*/src holds the relay's code");
    let mut measured = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        let (file_lines, sizes) = sizes(&text);
        measured.push((path, file_lines, sizes));
    }
    let test_files: Vec<PathBuf> = (measured.iter())
        .flat_map(|(path, _, sizes)| sizes.test_files.iter().map(|m| module_file(path, m)))
        .collect();
    let mut over = Vec::new();
    for (path, file_lines, sizes) in measured {
        if test_files.contains(&path) {
            continue;
        }
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        if file_lines > FILE_LINES {
            over.push(format!("{name}: {file_lines} lines besides its tests"));
        }
        for (function, n) in sizes.functions {
            if n > FUNCTION_LINES {
                over.push(format!("{name}: fn {function} has {n} lines"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "over {FILE_LINES} lines a file or {FUNCTION_LINES} a function:\n{}",
        over.join("\n")
    );
}

/// The counts are of the code itself: a test module is left out of its file, a function is
/// counted from `fn` to its closing brace, and one over the limit is found.
#[test]
fn sizes_leave_tests_out_and_find_a_long_function() {
    let long_body = "    let _x = 1;\n".repeat(FUNCTION_LINES);
    let text = format!(
        "/// Docs.\nfn short() {{}}\n\nfn long() {{\n{long_body}}}\n\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn t() {{}}\n}}\n"
    );
    let (file_lines, sizes) = sizes(&text);
    assert_eq!(file_lines, text.lines().count() - 5);
    let found: Vec<_> = sizes
        .functions
        .iter()
        .map(|(f, n)| (f.as_str(), *n))
        .collect();
    assert_eq!(found, [("short", 1), ("long", FUNCTION_LINES + 2)]);
}
