//! JMESPath conditions (`jmespath`, `$jmespath`): compiled once, evaluated over a document
//! converted for JMESPath at most once per notification.
//!
//! The jmespath crate parses and evaluates by recursion, one level (or a few) per nesting
//! level of the expression, and its tree is dropped by recursion too: an expression nested a
//! few thousand deep would overflow a thread's stack, while compiling or on the first
//! notification. So an expression is bounded before the crate sees it: its length, and a
//! conservative count of its nesting from a linear scan of the text; after compiling, the depth
//! of the tree, measured without recursion, is bounded as well.

use std::fmt;

use jmespath::ast::Ast;
use jmespath::{Context, DEFAULT_RUNTIME, Rcvar, Variable};
use serde_json::Value;

/// The longest JMESPath expression a pattern may hold, in bytes.
pub const JMESPATH_MAX_BYTES: usize = 1024;

/// The deepest a JMESPath expression may nest, as its levels are counted from its text: each
/// `.`, `|`, `||`, `&&`, comparison, `!`, `&`, `(` and `{` adds one level to what it applies
/// to, each `[`, `[?`, `[]` and `*` two (they make two nodes of the tree); a field or a
/// literal is one.
pub(crate) const JMESPATH_MAX_DEPTH: usize = 64;

/// A compiled JMESPath expression, evaluated without copying the document more than once.
#[derive(Clone)]
pub(super) struct Jmes(pub(super) std::sync::Arc<jmespath::Expression<'static>>);

impl fmt::Debug for Jmes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "jmespath({:?})", self.0.as_str())
    }
}

impl Jmes {
    /// Compiles an expression within [`JMESPATH_MAX_BYTES`] and [`JMESPATH_MAX_DEPTH`]; the
    /// message says what is wrong.
    pub(crate) fn compile(expression: &str) -> Result<Self, String> {
        if expression.len() > JMESPATH_MAX_BYTES {
            return Err(format!(
                "the JMESPath expression is {} bytes long; the limit is {JMESPATH_MAX_BYTES}",
                expression.len()
            ));
        }
        let nested = nesting(expression);
        if nested > JMESPATH_MAX_DEPTH {
            return Err(too_deep(nested));
        }
        let compiled = jmespath::compile(expression)
            .map_err(|e| format!("invalid JMESPath {expression:?}: {e}"))?;
        // The scan bounds the tree's depth; this holds evaluation to it whatever the scan missed.
        let depth = ast_depth(compiled.as_ast());
        if depth > JMESPATH_MAX_DEPTH {
            return Err(too_deep(depth));
        }
        Ok(Self(std::sync::Arc::new(compiled)))
    }

    /// True when the expression's result over `value` is truthy; errors count as false.
    pub(super) fn truthy(&self, value: &Value) -> bool {
        Variable::try_from(value).is_ok_and(|variable| self.truthy_over(&Rcvar::new(variable)))
    }

    /// The same, over a value already converted for JMESPath.
    pub(super) fn truthy_over(&self, data: &Rcvar) -> bool {
        let mut context = Context::new(self.0.as_str(), &DEFAULT_RUNTIME);
        jmespath::interpret(data, self.0.as_ast(), &mut context).is_ok_and(|r| r.is_truthy())
    }
}

fn too_deep(levels: usize) -> String {
    format!("the JMESPath expression nests {levels} levels deep; the limit is {JMESPATH_MAX_DEPTH}")
}

/// An upper bound on how deep the jmespath crate's parser recurses and its tree nests for
/// `expression`, from one pass over the text with an explicit stack of open brackets.
///
/// Within one bracketed group, every node of the tree comes from an operator of the group (a
/// path through it meets each operator at most once), from a bracket opened in it, or is a
/// leaf; below a bracket, its contents. So a group nests at most the weight of its operators
/// and brackets plus the deepest of its brackets' contents (or a leaf). Quoted identifiers,
/// raw strings and JSON literals are skipped: a literal's JSON is parsed by serde_json, whose
/// own recursion limit holds. Text the crate would refuse is counted as it comes; the crate
/// then says what is wrong.
pub(super) fn nesting(expression: &str) -> usize {
    // Per open group: the weight of its operators so far, and the deepest contents below it.
    let mut groups: Vec<(usize, usize)> = vec![(0, 0)];
    let bytes = expression.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let weight = match bytes[i] {
            quote @ (b'"' | b'\'' | b'`') => {
                i = skip_quoted(bytes, i + 1, quote);
                continue;
            }
            b'[' if bytes.get(i + 1) == Some(&b']') => {
                i += 1;
                2
            }
            b'[' if bytes.get(i + 1) == Some(&b'?') => {
                i += 2;
                open(&mut groups, 2);
                continue;
            }
            b'[' => {
                i += 1;
                open(&mut groups, 2);
                continue;
            }
            b'(' | b'{' => {
                i += 1;
                open(&mut groups, 1);
                continue;
            }
            b']' | b')' | b'}' => {
                i += 1;
                close(&mut groups);
                continue;
            }
            b'*' => 2,
            b'.' => 1,
            // `||`, `&&`, `==`, `!=`, `<=` and `>=` are one operator each.
            b'|' | b'&' | b'=' | b'!' | b'<' | b'>' => {
                let second = if matches!(bytes[i], b'|' | b'&') {
                    bytes[i]
                } else {
                    b'='
                };
                if bytes.get(i + 1) == Some(&second) {
                    i += 1;
                }
                1
            }
            _ => 0,
        };
        if let Some(group) = groups.last_mut() {
            group.0 += weight;
        }
        i += 1;
    }
    // Unclosed groups (the crate refuses them) close here, innermost first.
    while groups.len() > 1 {
        close(&mut groups);
    }
    groups
        .first()
        .map_or(0, |&(weight, deepest)| weight + deepest.max(1))
}

/// Opens a group: the bracket weighs `weight` in the group around it.
fn open(groups: &mut Vec<(usize, usize)>, weight: usize) {
    if let Some(group) = groups.last_mut() {
        group.0 += weight;
    }
    groups.push((0, 0));
}

/// Closes the innermost group (a stray closing bracket closes nothing): its depth becomes a
/// candidate for the deepest contents of the group around it.
fn close(groups: &mut Vec<(usize, usize)>) {
    if groups.len() > 1
        && let Some((weight, deepest)) = groups.pop()
        && let Some(outer) = groups.last_mut()
    {
        outer.1 = outer.1.max(weight + deepest.max(1));
    }
}

/// The index after the closing `quote` of a quoted run starting at `i` (a backslash escapes
/// the next character, as the crate's lexer reads it), or the end of the text.
fn skip_quoted(bytes: &[u8], mut i: usize, quote: u8) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The depth of a compiled expression's tree (a leaf is 1), walked with an explicit stack.
pub(super) fn ast_depth(root: &Ast) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        let below = depth + 1;
        match node {
            Ast::Comparison { lhs, rhs, .. }
            | Ast::Projection { lhs, rhs, .. }
            | Ast::And { lhs, rhs, .. }
            | Ast::Or { lhs, rhs, .. }
            | Ast::Subexpr { lhs, rhs, .. } => {
                stack.push((lhs, below));
                stack.push((rhs, below));
            }
            Ast::Condition {
                predicate, then, ..
            } => {
                stack.push((predicate, below));
                stack.push((then, below));
            }
            Ast::Expref { ast: node, .. }
            | Ast::Flatten { node, .. }
            | Ast::Not { node, .. }
            | Ast::ObjectValues { node, .. } => stack.push((node, below)),
            Ast::Function { args, .. } | Ast::MultiList { elements: args, .. } => {
                stack.extend(args.iter().map(|arg| (arg, below)));
            }
            Ast::MultiHash { elements, .. } => {
                stack.extend(elements.iter().map(|pair| (&pair.value, below)));
            }
            Ast::Identity { .. }
            | Ast::Field { .. }
            | Ast::Index { .. }
            | Ast::Literal { .. }
            | Ast::Slice { .. } => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread with half the stack of a tokio worker (2 MiB). The crate's
    /// interpreter takes about 6 KB of stack a level in a debug build (about 0.5 KB in release),
    /// so 64 levels need about 400 KB here.
    fn small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn the_scan_bounds_the_tree_of_every_kind_of_expression() {
        for expression in [
            "a",
            "a.b.c",
            "!a",
            "!!a.b",
            "a || b && c == d",
            "a[*].b[*].c",
            "a[].b[?c == `1`].d | [0]",
            "*.a",
            "a.*.b",
            "{x: a, y: [b, c]}",
            "length(keys(@)) > `2`",
            "sort_by(a, &b)[0]",
            "a[1:2].b",
            "[1:]",
            "((a))",
            "a[?b[?c]]",
            "f(g(h(a)))",
            "`[[1]]` == a",
            "'a)' == \"b]\"",
            "event_type == 'CREATE' && length(attachments.sample_id) > `0`",
        ] {
            let ast = jmespath::parse(expression).unwrap();
            let (bound, depth) = (nesting(expression), ast_depth(&ast));
            assert!(bound >= depth, "{expression}: scan {bound} < tree {depth}");
        }
    }

    #[test]
    fn the_tree_depth_is_measured_and_held_to_the_limit() {
        // Dots are parsed in a loop, so the parser takes 100 of them, but the tree is 101 deep.
        let chain = format!("a{}", ".a".repeat(100));
        let ast = jmespath::parse(&chain).unwrap();
        assert_eq!(ast_depth(&ast), 101);
        assert_eq!(ast_depth(&jmespath::parse("!!a").unwrap()), 3);
        assert_eq!(nesting(&chain), 101);
        let error = Jmes::compile(&chain).unwrap_err();
        assert_eq!(
            error,
            "the JMESPath expression nests 101 levels deep; the limit is 64"
        );
    }

    #[test]
    fn quoted_text_does_not_count() {
        assert_eq!(nesting("a == '((((((('"), 2);
        assert_eq!(nesting(r#""a\"[[[[" == `"\`[[[["`"#), 2);
        // Unclosed or stray brackets are counted without a crash; the crate refuses them.
        assert!(Jmes::compile("a[").is_err());
        assert!(Jmes::compile("a]]]").is_err());
        assert!(Jmes::compile("'unclosed").is_err());
    }

    #[test]
    fn an_expression_at_the_limit_compiles_and_evaluates_on_a_worker_sized_stack() {
        small_stack(|| {
            let document = serde_json::json!({"a": {"a": true}});
            for expression in [
                format!("{}a", "!".repeat(63)),
                format!("{}a{}", "(".repeat(63), ")".repeat(63)),
                format!("a{}", ".a".repeat(63)),
                format!("{}!a{}", "[".repeat(31), "]".repeat(31)),
                format!("{}a{}", "{a: ".repeat(63), "}".repeat(63)),
                format!("{}a{}", "not_null(".repeat(63), ")".repeat(63)),
            ] {
                assert_eq!(nesting(&expression), JMESPATH_MAX_DEPTH, "{expression}");
                let compiled = Jmes::compile(&expression).unwrap_or_else(|e| panic!("{e}"));
                compiled.truthy(&document);
                // One level more is refused.
                let deeper = format!("!{expression}");
                assert_eq!(
                    Jmes::compile(&deeper).unwrap_err(),
                    "the JMESPath expression nests 65 levels deep; the limit is 64"
                );
            }
        });
    }
}
