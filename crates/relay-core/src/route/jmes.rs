//! JMESPath conditions (`jmespath`, `$jmespath`): compiled once, evaluated over a document
//! converted for JMESPath at most once per notification.

use std::fmt;

use jmespath::{Context, DEFAULT_RUNTIME, Rcvar, Variable};
use serde_json::Value;

/// A compiled JMESPath expression, evaluated without copying the document more than once.
#[derive(Clone)]
pub(super) struct Jmes(pub(super) std::sync::Arc<jmespath::Expression<'static>>);

impl fmt::Debug for Jmes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "jmespath({:?})", self.0.as_str())
    }
}

impl Jmes {
    pub(crate) fn compile(expression: &str) -> Result<Self, String> {
        jmespath::compile(expression)
            .map(|e| Self(std::sync::Arc::new(e)))
            .map_err(|e| format!("invalid JMESPath {expression:?}: {e}"))
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
