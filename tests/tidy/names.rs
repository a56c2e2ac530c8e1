//! relay-core's public types have one name each: no two `pub` structs, enums, traits or type
//! aliases in its sources share one, so that a name in a signature, a log line or the docs
//! means one thing. Test code and crate-private types are left out.
//!
//! And a field says what it is: no struct that is not `pub` has a `pub` field in any crate's
//! sources, which would read as public surface and is not.

use std::collections::BTreeMap;
use std::path::PathBuf;

use syn::visit::Visit;

use crate::sizes::{is_test_only, repository, sources};

/// The public type names one file declares, test items left out.
#[derive(Default)]
struct Names(Vec<String>);

impl Names {
    fn public(&mut self, vis: &syn::Visibility, name: &syn::Ident) {
        if matches!(vis, syn::Visibility::Public(_)) {
            self.0.push(name.to_string());
        }
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        match item {
            syn::Item::Mod(m) if is_test_only(&m.attrs) => return,
            syn::Item::Struct(s) if !is_test_only(&s.attrs) => self.public(&s.vis, &s.ident),
            syn::Item::Enum(e) if !is_test_only(&e.attrs) => self.public(&e.vis, &e.ident),
            syn::Item::Trait(t) if !is_test_only(&t.attrs) => self.public(&t.vis, &t.ident),
            syn::Item::Type(t) if !is_test_only(&t.attrs) => self.public(&t.vis, &t.ident),
            _ => {}
        }
        syn::visit::visit_item(self, item);
    }
}

/// Each public type name declared more than once among `files` (a name and its source text),
/// with the files declaring it.
fn repeated(files: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut declared: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, text) in files {
        let mut names = Names::default();
        names.visit_file(&syn::parse_file(text).expect("a file that parses"));
        for name in names.0 {
            declared.entry(name).or_default().push(file.clone());
        }
    }
    declared.retain(|_, files| files.len() > 1);
    declared
}

#[test]
fn relay_cores_public_type_names_are_unique() {
    let root = repository();
    let mut paths: Vec<PathBuf> = Vec::new();
    sources(&root.join("crates/relay-core/src"), &mut paths);
    assert!(paths.len() > 50, "relay-core/src holds the relay's core");
    let files: Vec<(String, String)> = (paths.iter())
        .map(|path| {
            let name = path.strip_prefix(&root).unwrap_or(path).display();
            let text = std::fs::read_to_string(path).expect("a readable source file");
            (name.to_string(), text)
        })
        .collect();
    let repeated = repeated(&files);
    assert!(
        repeated.is_empty(),
        "public type names declared more than once in relay-core: {repeated:#?}"
    );
}

/// Two public types of one name are found wherever they are; a crate-private one or one in a
/// test module does not count.
#[test]
fn a_name_declared_twice_is_found() {
    let files = [
        ("a.rs", "pub struct Held;\npub(crate) struct Entry;\n"),
        ("b.rs", "pub mod inner {\n    pub enum Held {}\n}\n"),
        (
            "c.rs",
            "struct Entry;\n#[cfg(test)]\nmod tests {\n    pub struct Held;\n}\n",
        ),
    ]
    .map(|(file, text)| (file.to_owned(), text.to_owned()));
    let repeated = repeated(&files);
    let expected = BTreeMap::from([("Held".to_owned(), vec!["a.rs".to_owned(), "b.rs".into()])]);
    assert_eq!(repeated, expected);
}

/// The fields written `pub` in structs that are not, as `Struct.field`, test items left out.
#[derive(Default)]
struct PubInPrivate(Vec<String>);

impl<'ast> Visit<'ast> for PubInPrivate {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        match item {
            syn::Item::Mod(m) if is_test_only(&m.attrs) => return,
            syn::Item::Struct(s)
                if !is_test_only(&s.attrs) && !matches!(s.vis, syn::Visibility::Public(_)) =>
            {
                let public = (s.fields.iter())
                    .filter(|f| matches!(f.vis, syn::Visibility::Public(_)))
                    .filter_map(|f| f.ident.as_ref());
                self.0
                    .extend(public.map(|field| format!("{}.{field}", s.ident)));
            }
            _ => {}
        }
        syn::visit::visit_item(self, item);
    }
}

fn pub_in_private(text: &str) -> Vec<String> {
    let mut found = PubInPrivate::default();
    found.visit_file(&syn::parse_file(text).expect("a file that parses"));
    found.0
}

#[test]
fn no_private_struct_has_a_pub_field() {
    let root = repository();
    let mut paths: Vec<PathBuf> = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).expect("the crates folder") {
        sources(
            &krate.expect("a crate folder").path().join("src"),
            &mut paths,
        );
    }
    assert!(paths.len() > 100, "crates/*/src holds the relay's sources");
    let found: Vec<String> = (paths.iter())
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).expect("a readable source file");
            let name = path
                .strip_prefix(&root)
                .unwrap_or(path)
                .display()
                .to_string();
            pub_in_private(&text)
                .into_iter()
                .map(move |f| format!("{name}: {f}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "pub fields of structs that are not pub (write pub(crate) or less): {found:#?}"
    );
}

/// A `pub` field is found in a crate-private struct and in a private one, not in a public
/// struct, not where the field says `pub(crate)`, and not in a test module.
#[test]
fn a_pub_field_of_a_private_struct_is_found() {
    let text = "pub(crate) struct A { pub a: u8, pub(crate) b: u8 }\n\
                struct B { pub c: u8 }\n\
                pub struct C { pub d: u8 }\n\
                #[cfg(test)]\nmod tests { struct D { pub e: u8 } }\n";
    assert_eq!(pub_in_private(text), ["A.a", "B.c"]);
}
