//! The Terraform configurations under `terraform/`, parsed with hcl-rs: one [`Config`] per module
//! or example directory, with lookups for the blocks the tests read.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use hcl::expr::TraversalOperator;
use hcl::{Block, Body, Expression, ObjectKey};

/// `terraform/` at the root of the repository.
pub(crate) fn terraform_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../terraform")
}

/// Every module under `terraform/modules/`.
pub(crate) fn modules() -> Vec<Config> {
    load_all("modules")
}

/// Every example under `terraform/examples/`.
pub(crate) fn examples() -> Vec<Config> {
    load_all("examples")
}

/// The module `terraform/modules/<name>`.
pub(crate) fn module(name: &str) -> Config {
    Config::load(&terraform_dir().join("modules").join(name))
}

fn load_all(kind: &str) -> Vec<Config> {
    let dir = terraform_dir().join(kind);
    let mut dirs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no configuration under {}", dir.display());
    dirs.iter().map(|d| Config::load(d)).collect()
}

/// One Terraform directory (a module or an example): its `.tf` files, parsed.
#[derive(Debug)]
pub(crate) struct Config {
    /// `modules/aws-relay`, `examples/aws-sqs`, …: how failures name it.
    pub(crate) name: String,
    /// The directory.
    pub(crate) dir: PathBuf,
    /// File name → parsed body, for every `*.tf` file.
    pub(crate) files: BTreeMap<String, Body>,
}

impl Config {
    /// Parses every `*.tf` file of `dir`; a file hcl-rs cannot parse fails the test.
    pub(crate) fn load(dir: &Path) -> Config {
        Self::load_edited(dir, &|_, text| text)
    }

    /// [`load`](Self::load), with each file's text passed through `edit(file name, text)`
    /// first: how the mutation tests break a configuration without touching the disk.
    pub(crate) fn load_edited(dir: &Path, edit: &dyn Fn(&str, String) -> String) -> Config {
        let mut files = BTreeMap::new();
        for entry in
            fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        {
            let path = entry.expect("directory entry").path();
            if path.extension().is_some_and(|ext| ext == "tf") {
                let file = path
                    .file_name()
                    .expect("file name")
                    .to_string_lossy()
                    .into_owned();
                let text = edit(&file, fs::read_to_string(&path).expect("readable .tf file"));
                let body = hcl::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                files.insert(file, body);
            }
        }
        let kind = dir
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned());
        let base = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        Config {
            name: format!("{}/{}", kind.unwrap_or_default(), base.unwrap_or_default()),
            dir: dir.to_owned(),
            files,
        }
    }

    /// The directory's base name (`aws-relay`).
    pub(crate) fn base_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }

    /// Top-level blocks of one kind (`variable`, `resource`, …) across all files.
    pub(crate) fn blocks<'a>(&'a self, ident: &'a str) -> impl Iterator<Item = &'a Block> + 'a {
        self.files
            .values()
            .flat_map(move |body| body.blocks().filter(move |b| b.identifier() == ident))
    }

    /// `variable` blocks by name.
    pub(crate) fn variables(&self) -> BTreeMap<&str, &Block> {
        self.blocks("variable").map(|b| (label(b, 0), b)).collect()
    }

    /// The one `variable "<name>"` block; panics when it is missing.
    pub(crate) fn variable(&self, name: &str) -> &Block {
        self.named("variable", name)
            .unwrap_or_else(|| panic!("{}: no variable {name}", self.name))
    }

    /// The top-level block `<ident> "<name>"` (a variable, an output), if there is one.
    fn named<'a>(&'a self, ident: &'a str, name: &str) -> Option<&'a Block> {
        self.blocks(ident).find(|b| label(b, 0) == name)
    }

    /// `output` blocks by name.
    pub(crate) fn outputs(&self) -> BTreeMap<&str, &Block> {
        self.blocks("output").map(|b| (label(b, 0), b)).collect()
    }

    /// The `value` of output `name`; panics when the output or its value is missing.
    pub(crate) fn output_value(&self, name: &str) -> &Expression {
        self.named("output", name)
            .and_then(|b| attr(b.body(), "value"))
            .unwrap_or_else(|| panic!("{}: no output {name} with a value", self.name))
    }

    /// Every `locals` entry by name.
    pub(crate) fn locals(&self) -> BTreeMap<&str, &Expression> {
        self.blocks("locals")
            .flat_map(|b| b.body().attributes())
            .map(|a| (a.key(), a.expr()))
            .collect()
    }

    /// `resource "<ty>" "<name>"` blocks, as `(name, block)`.
    pub(crate) fn resources(&self, ty: &str) -> Vec<(&str, &Block)> {
        self.blocks("resource")
            .filter(|b| label(b, 0) == ty)
            .map(|b| (label(b, 1), b))
            .collect()
    }

    /// The one `resource "<ty>" "<name>"` block; panics when it is missing.
    pub(crate) fn resource(&self, ty: &str, name: &str) -> &Block {
        self.resources(ty)
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b)
            .unwrap_or_else(|| panic!("{}: no resource {ty}.{name}", self.name))
    }

    /// Attribute `key` of the one `resource "<ty>" "<name>"` block; panics when it is missing.
    pub(crate) fn resource_attr(&self, ty: &str, name: &str, key: &str) -> &Expression {
        attr(self.resource(ty, name).body(), key)
            .unwrap_or_else(|| panic!("{}: {ty}.{name} has no {key}", self.name))
    }

    /// Resource types declared in the configuration.
    pub(crate) fn resource_types(&self) -> Vec<&str> {
        self.blocks("resource").map(|b| label(b, 0)).collect()
    }

    /// The one `data "<ty>" "<name>"` block; panics when it is missing.
    pub(crate) fn data(&self, ty: &str, name: &str) -> &Block {
        self.blocks("data")
            .find(|b| label(b, 0) == ty && label(b, 1) == name)
            .unwrap_or_else(|| panic!("{}: no data source {ty}.{name}", self.name))
    }

    /// `module` blocks calling a module of this repository, as `(call name, module base name,
    /// block)`.
    pub(crate) fn module_calls(&self) -> Vec<(&str, String, &Block)> {
        self.blocks("module")
            .map(|b| {
                let source = attr(b.body(), "source")
                    .and_then(literal_string)
                    .unwrap_or_default();
                let target = source.strip_prefix("../../modules/").unwrap_or_else(|| {
                    panic!(
                        "{}: module {} must call ../../modules/<name>, not {source:?}",
                        self.name,
                        label(b, 0)
                    )
                });
                (label(b, 0), target.to_owned(), b)
            })
            .collect()
    }

    /// The text of one file of the directory (README.md, a .tf file as written).
    pub(crate) fn read(&self, file: &str) -> String {
        let path = self.dir.join(file);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// A file of the configuration's folder, asserting that it mentions each of `texts`.
    #[track_caller]
    pub(crate) fn read_mentioning(&self, file: &str, texts: &[&str]) -> String {
        let read = self.read(file);
        for text in texts {
            assert!(
                read.contains(text),
                "{}: {file} does not mention {text}",
                self.name
            );
        }
        read
    }
}

/// The `i`-th label of a block (`resource "aws_sqs_queue" "this"`: 0 is the type, 1 the name).
pub(crate) fn label(block: &Block, i: usize) -> &str {
    block.labels().get(i).map(|l| l.as_str()).unwrap_or("")
}

/// An attribute of a body.
pub(crate) fn attr<'a>(body: &'a Body, key: &str) -> Option<&'a Expression> {
    body.attributes().find(|a| a.key() == key).map(|a| a.expr())
}

/// Nested blocks of one kind.
pub(crate) fn nested<'a>(body: &'a Body, ident: &'a str) -> impl Iterator<Item = &'a Block> + 'a {
    body.blocks().filter(move |b| b.identifier() == ident)
}

/// The value of a string literal (`"json"`), if the expression is one.
pub(crate) fn literal_string(expr: &Expression) -> Option<String> {
    match expr {
        Expression::String(s) => Some(s.clone()),
        Expression::TemplateExpr(t) => {
            let template = hcl::template::Template::from_expr(t).ok()?;
            match template.elements() {
                [hcl::template::Element::Literal(s)] => Some(s.clone()),
                [] => Some(String::new()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The values of a list of string literals (`["sqs:SendMessage"]`).
pub(crate) fn literal_strings(expr: &Expression) -> Option<Vec<String>> {
    match expr {
        Expression::Array(items) => items.iter().map(literal_string).collect(),
        _ => None,
    }
}

/// An object key as written: an identifier, a string, or `(expression)` as source text.
pub(crate) fn object_key(key: &ObjectKey) -> String {
    match key {
        ObjectKey::Identifier(id) => id.to_string(),
        ObjectKey::Expression(expr) => literal_string(expr).unwrap_or_else(|| format!("({expr})")),
        _ => String::new(),
    }
}

/// `<root>.<name>` references anywhere in an expression (`var.<name>` with `root` "var",
/// `local.<name>` with "local"): the names.
pub(crate) fn references(expr: &Expression, root: &str) -> Vec<String> {
    let mut found = Vec::new();
    walk(expr, &mut |e| {
        if let Some(name) = root_attribute(e, root) {
            found.push(name);
        }
    });
    found
}

/// `<root>.<name>…` → `name`, for a traversal rooted at the variable `root`.
pub(crate) fn root_attribute(expr: &Expression, root: &str) -> Option<String> {
    let Expression::Traversal(t) = expr else {
        return None;
    };
    let Expression::Variable(v) = &t.expr else {
        return None;
    };
    if v.as_str() != root {
        return None;
    }
    match t.operators.first() {
        Some(TraversalOperator::GetAttr(name)) => Some(name.to_string()),
        _ => None,
    }
}

/// Calls `f` on `expr` and every expression inside it, template interpolations included.
pub(crate) fn walk(expr: &Expression, f: &mut dyn FnMut(&Expression)) {
    f(expr);
    match expr {
        Expression::Array(items) => items.iter().for_each(|e| walk(e, f)),
        Expression::Object(object) => {
            for (key, value) in object.iter() {
                if let ObjectKey::Expression(k) = key {
                    walk(k, f);
                }
                walk(value, f);
            }
        }
        Expression::TemplateExpr(t) => {
            if let Ok(template) = hcl::template::Template::from_expr(t) {
                for element in template.elements() {
                    if let hcl::template::Element::Interpolation(i) = element {
                        walk(&i.expr, f);
                    }
                }
            }
        }
        Expression::Traversal(t) => {
            walk(&t.expr, f);
            for op in &t.operators {
                if let TraversalOperator::Index(e) = op {
                    walk(e, f);
                }
            }
        }
        Expression::FuncCall(call) => call.args.iter().for_each(|e| walk(e, f)),
        Expression::Parenthesis(inner) => walk(inner, f),
        Expression::Conditional(c) => {
            walk(&c.cond_expr, f);
            walk(&c.true_expr, f);
            walk(&c.false_expr, f);
        }
        Expression::Operation(op) => match op.as_ref() {
            hcl::expr::Operation::Unary(u) => walk(&u.expr, f),
            hcl::expr::Operation::Binary(b) => {
                walk(&b.lhs_expr, f);
                walk(&b.rhs_expr, f);
            }
        },
        Expression::ForExpr(fe) => {
            walk(&fe.collection_expr, f);
            if let Some(k) = &fe.key_expr {
                walk(k, f);
            }
            walk(&fe.value_expr, f);
            if let Some(c) = &fe.cond_expr {
                walk(c, f);
            }
        }
        _ => {}
    }
}
