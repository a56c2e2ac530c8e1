//! The subset of DynamoDB's expression language the fake endpoint evaluates: condition
//! expressions (`attribute_exists`, `attribute_not_exists`, `begins_with`, `= <> < <= > >=`,
//! `AND`, `OR`, `NOT`, parentheses) and update expressions (`SET` with plain values,
//! `if_not_exists` and `list_append`; `REMOVE`), over document paths (`a.b[2].c`) with `#name`
//! and `:value` placeholders. Each expression is parsed once per request, its placeholders
//! resolved then; every placeholder a request declares must be used, as DynamoDB requires.
//!
//! Attribute values are their JSON forms (`{"S": "x"}`, `{"N": "1"}`, `{"M": {…}}`, …).

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

/// An item: attribute name to attribute value (JSON form).
pub(crate) type Item = Map<String, Value>;

/// A request DynamoDB would refuse with `ValidationException`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid(pub(crate) String);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

pub(crate) fn invalid<T>(message: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid(message.into()))
}

/// One step of a document path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// An attribute of the item, or a field of a map.
    Field(String),
    /// An element of a list.
    Index(usize),
}

/// A document path, placeholders resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(pub(crate) Vec<Step>);

/// What an operand evaluates to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operand {
    /// The value at a path of the item (absent when it has none).
    Path(Path),
    /// A `:value`.
    Value(Value),
    /// `if_not_exists(path, operand)`.
    IfNotExists(Path, Box<Operand>),
    /// `list_append(a, b)`.
    ListAppend(Box<Operand>, Box<Operand>),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A condition expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Condition {
    Or(Box<Condition>, Box<Condition>),
    And(Box<Condition>, Box<Condition>),
    Not(Box<Condition>),
    Compare(Operand, Cmp, Operand),
    Exists(Path),
    NotExists(Path),
    BeginsWith(Operand, Operand),
}

/// An update expression.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Update {
    pub(crate) set: Vec<(Path, Operand)>,
    pub(crate) remove: Vec<Path>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Name(String),
    Value(String),
    Number(usize),
    Open,
    Close,
    OpenBracket,
    CloseBracket,
    Dot,
    Comma,
    Cmp(Cmp),
}

fn lex(text: &str) -> Result<Vec<Token>, Invalid> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let word_end = |mut j: usize| {
        while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
            j += 1;
        }
        j
    };
    while i < bytes.len() {
        let c = bytes[i];
        let (token, next) = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => (Token::Open, i + 1),
            b')' => (Token::Close, i + 1),
            b'[' => (Token::OpenBracket, i + 1),
            b']' => (Token::CloseBracket, i + 1),
            b'.' => (Token::Dot, i + 1),
            b',' => (Token::Comma, i + 1),
            b'=' => (Token::Cmp(Cmp::Eq), i + 1),
            b'<' if bytes.get(i + 1) == Some(&b'>') => (Token::Cmp(Cmp::Ne), i + 2),
            b'<' if bytes.get(i + 1) == Some(&b'=') => (Token::Cmp(Cmp::Le), i + 2),
            b'<' => (Token::Cmp(Cmp::Lt), i + 1),
            b'>' if bytes.get(i + 1) == Some(&b'=') => (Token::Cmp(Cmp::Ge), i + 2),
            b'>' => (Token::Cmp(Cmp::Gt), i + 1),
            b'#' | b':' => {
                let end = word_end(i + 1);
                if end == i + 1 {
                    return invalid(format!("Invalid expression: a bare {:?}", c as char));
                }
                let placeholder = text[i..end].to_owned();
                match c {
                    b'#' => (Token::Name(placeholder), end),
                    _ => (Token::Value(placeholder), end),
                }
            }
            c if c.is_ascii_digit() => {
                let mut end = i;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
                let n = text[i..end]
                    .parse()
                    .map_err(|_| Invalid(format!("Invalid list index {}", &text[i..end])))?;
                (Token::Number(n), end)
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let end = word_end(i);
                (Token::Word(text[i..end].to_owned()), end)
            }
            other => {
                return invalid(format!(
                    "Invalid expression: unexpected {:?} at {i}",
                    other as char
                ));
            }
        };
        tokens.push(token);
        i = next;
    }
    Ok(tokens)
}

/// Parses the expressions of one request against its placeholders, and checks that every
/// declared placeholder was used.
pub(crate) struct Parser<'a> {
    names: &'a Map<String, Value>,
    values: &'a Map<String, Value>,
    used_names: HashSet<String>,
    used_values: HashSet<String>,
    tokens: Vec<Token>,
    at: usize,
}

impl<'a> Parser<'a> {
    /// A parser of expressions using `names` (`ExpressionAttributeNames`) and `values`
    /// (`ExpressionAttributeValues`).
    pub(crate) fn new(names: &'a Map<String, Value>, values: &'a Map<String, Value>) -> Self {
        Self {
            names,
            values,
            used_names: HashSet::new(),
            used_values: HashSet::new(),
            tokens: Vec::new(),
            at: 0,
        }
    }

    /// A condition expression (also a key condition).
    pub(crate) fn condition(&mut self, text: &str) -> Result<Condition, Invalid> {
        self.start(text)?;
        let condition = self.or()?;
        self.end()?;
        Ok(condition)
    }

    /// An update expression.
    pub(crate) fn update(&mut self, text: &str) -> Result<Update, Invalid> {
        self.start(text)?;
        let mut update = Update::default();
        let (mut seen_set, mut seen_remove) = (false, false);
        while self.at < self.tokens.len() {
            let clause = match self.next() {
                Some(Token::Word(w)) => w.to_ascii_uppercase(),
                other => {
                    return invalid(format!(
                        "Invalid UpdateExpression: expected a clause, got {other:?}"
                    ));
                }
            };
            match clause.as_str() {
                "SET" if !seen_set => {
                    seen_set = true;
                    loop {
                        let path = self.path()?;
                        self.expect(&Token::Cmp(Cmp::Eq))?;
                        let value = self.operand(true)?;
                        update.set.push((path, value));
                        if !self.eat(&Token::Comma) {
                            break;
                        }
                    }
                }
                "REMOVE" if !seen_remove => {
                    seen_remove = true;
                    loop {
                        update.remove.push(self.path()?);
                        if !self.eat(&Token::Comma) {
                            break;
                        }
                    }
                }
                "SET" | "REMOVE" => {
                    return invalid(format!(
                        "Invalid UpdateExpression: The \"{clause}\" section can only be used once in an update expression"
                    ));
                }
                other => {
                    return invalid(format!(
                        "Invalid UpdateExpression: {other} is not supported here"
                    ));
                }
            }
        }
        if update.set.is_empty() && update.remove.is_empty() {
            return invalid("Invalid UpdateExpression: an empty expression");
        }
        super::evaluate::check_overlaps(&update)?;
        Ok(update)
    }

    /// Every declared placeholder was used (DynamoDB refuses the request otherwise).
    pub(crate) fn finish(&self) -> Result<(), Invalid> {
        let unused = |declared: &Map<String, Value>, used: &HashSet<String>| {
            let mut keys: Vec<&str> = declared
                .keys()
                .filter(|k| !used.contains(*k))
                .map(String::as_str)
                .collect();
            keys.sort_unstable();
            keys.join(", ")
        };
        let names = unused(self.names, &self.used_names);
        if !names.is_empty() {
            return invalid(format!(
                "Value provided in ExpressionAttributeNames unused in expressions: keys: {{{names}}}"
            ));
        }
        let values = unused(self.values, &self.used_values);
        if !values.is_empty() {
            return invalid(format!(
                "Value provided in ExpressionAttributeValues unused in expressions: keys: {{{values}}}"
            ));
        }
        Ok(())
    }

    fn start(&mut self, text: &str) -> Result<(), Invalid> {
        self.tokens = lex(text)?;
        self.at = 0;
        if self.tokens.is_empty() {
            return invalid("Invalid expression: The expression can not be empty;");
        }
        Ok(())
    }

    fn end(&self) -> Result<(), Invalid> {
        match self.tokens.get(self.at) {
            None => Ok(()),
            Some(t) => invalid(format!("Invalid expression: unexpected {t:?} at the end")),
        }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn eat(&mut self, token: &Token) -> bool {
        let found = self.peek() == Some(token);
        self.at += usize::from(found);
        found
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word));
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, token: &Token) -> Result<(), Invalid> {
        match self.eat(token) {
            true => Ok(()),
            false => invalid(format!(
                "Invalid expression: expected {token:?}, got {:?}",
                self.peek()
            )),
        }
    }

    fn or(&mut self) -> Result<Condition, Invalid> {
        let mut left = self.and()?;
        while self.eat_word("OR") {
            left = Condition::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Condition, Invalid> {
        let mut left = self.not()?;
        while self.eat_word("AND") {
            left = Condition::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Condition, Invalid> {
        match self.eat_word("NOT") {
            true => Ok(Condition::Not(Box::new(self.not()?))),
            false => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Condition, Invalid> {
        if self.eat(&Token::Open) {
            let inner = self.or()?;
            self.expect(&Token::Close)?;
            return Ok(inner);
        }
        let function = match (self.peek(), self.tokens.get(self.at + 1)) {
            (Some(Token::Word(w)), Some(Token::Open)) => Some(w.clone()),
            _ => None,
        };
        if let Some(function) = function {
            let condition = match function.as_str() {
                "attribute_exists" | "attribute_not_exists" => {
                    self.at += 2;
                    let path = self.path()?;
                    match function.as_str() {
                        "attribute_exists" => Condition::Exists(path),
                        _ => Condition::NotExists(path),
                    }
                }
                "begins_with" => {
                    self.at += 2;
                    let a = self.operand(false)?;
                    self.expect(&Token::Comma)?;
                    Condition::BeginsWith(a, self.operand(false)?)
                }
                other => {
                    return invalid(format!(
                        "Invalid ConditionExpression: function {other} is not supported here"
                    ));
                }
            };
            self.expect(&Token::Close)?;
            return Ok(condition);
        }
        let left = self.operand(false)?;
        let cmp = match self.next() {
            Some(Token::Cmp(cmp)) => cmp,
            other => {
                return invalid(format!(
                    "Invalid ConditionExpression: expected a comparison, got {other:?}"
                ));
            }
        };
        Ok(Condition::Compare(left, cmp, self.operand(false)?))
    }

    /// A path, a `:value`, or (in an update's SET) `if_not_exists` and `list_append`.
    fn operand(&mut self, in_update: bool) -> Result<Operand, Invalid> {
        if let Some(Token::Value(placeholder)) = self.peek() {
            let placeholder = placeholder.clone();
            self.at += 1;
            let Some(value) = self.values.get(&placeholder) else {
                return invalid(format!(
                    "An expression attribute value used in expression is not defined; attribute value: {placeholder}"
                ));
            };
            self.used_values.insert(placeholder);
            return Ok(Operand::Value(value.clone()));
        }
        if let (Some(Token::Word(w)), Some(Token::Open)) =
            (self.peek(), self.tokens.get(self.at + 1))
        {
            let function = w.clone();
            if !in_update {
                return invalid(format!(
                    "Invalid ConditionExpression: function {function} is not allowed here"
                ));
            }
            self.at += 2;
            let operand = match function.as_str() {
                "if_not_exists" => {
                    let path = self.path()?;
                    self.expect(&Token::Comma)?;
                    Operand::IfNotExists(path, Box::new(self.operand(true)?))
                }
                "list_append" => {
                    let a = self.operand(true)?;
                    self.expect(&Token::Comma)?;
                    Operand::ListAppend(Box::new(a), Box::new(self.operand(true)?))
                }
                other => {
                    return invalid(format!(
                        "Invalid UpdateExpression: function {other} is not supported here"
                    ));
                }
            };
            self.expect(&Token::Close)?;
            return Ok(operand);
        }
        Ok(Operand::Path(self.path()?))
    }

    fn field(&mut self) -> Result<String, Invalid> {
        match self.next() {
            Some(Token::Word(word)) => Ok(word),
            Some(Token::Name(placeholder)) => {
                let Some(Value::String(name)) = self.names.get(&placeholder) else {
                    return invalid(format!(
                        "An expression attribute name used in the document path is not defined; attribute name: {placeholder}"
                    ));
                };
                self.used_names.insert(placeholder);
                Ok(name.clone())
            }
            other => invalid(format!(
                "Invalid expression: expected an attribute name, got {other:?}"
            )),
        }
    }

    fn path(&mut self) -> Result<Path, Invalid> {
        let mut steps = vec![Step::Field(self.field()?)];
        loop {
            if self.eat(&Token::Dot) {
                steps.push(Step::Field(self.field()?));
            } else if self.eat(&Token::OpenBracket) {
                match self.next() {
                    Some(Token::Number(n)) => steps.push(Step::Index(n)),
                    other => {
                        return invalid(format!(
                            "Invalid expression: expected a list index, got {other:?}"
                        ));
                    }
                }
                self.expect(&Token::CloseBracket)?;
            } else {
                return Ok(Path(steps));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::evaluate::{INVALID_PATH, apply, holds};
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn item() -> Item {
        object(json!({
            "ledger_key": {"S": "k"},
            "expires_at": {"N": "1800000100"},
            "l:q1": {"M": {"holder": {"S": "a1"}, "until": {"N": "1800000007000"}}},
            "a:q2": {"M": {"at": {"N": "5"}}},
            "attempts": {"L": [{"M": {"id": {"S": "a1"}}}, {"M": {"id": {"S": "a2"}}}]},
        }))
    }

    /// Only the placeholders `text` names, of `declared`.
    fn named_in(text: &str, declared: &Value) -> Map<String, Value> {
        let mut declared = object(declared.clone());
        declared.retain(|k, _| text.contains(k.as_str()));
        declared
    }

    fn check(condition: &str, names: Value, values: Value) -> Result<bool, Invalid> {
        check_exact(
            condition,
            named_in(condition, &names),
            named_in(condition, &values),
        )
    }

    fn check_exact(
        condition: &str,
        names: Map<String, Value>,
        values: Map<String, Value>,
    ) -> Result<bool, Invalid> {
        let parsed = parsed((&names, &values), |parser| parser.condition(condition))?;
        holds(&item(), &parsed)
    }

    /// What `parse` reads with a parser of `names` and `values`, which must all be used.
    fn parsed<T>(
        (names, values): (&Map<String, Value>, &Map<String, Value>),
        parse: impl FnOnce(&mut Parser<'_>) -> Result<T, Invalid>,
    ) -> Result<T, Invalid> {
        let mut parser = Parser::new(names, values);
        let parsed = parse(&mut parser)?;
        parser.finish()?;
        Ok(parsed)
    }

    #[test]
    fn conditions_follow_precedence_paths_and_placeholders() {
        let names = json!({"#l": "l:q1", "#until": "until", "#exp": "expires_at", "#att": "attempts", "#id": "id"});
        let values =
            json!({":now": {"N": "1800000007001"}, ":s": {"N": "1800000100"}, ":h": {"S": "a2"}});
        let cases = [
            ("#l.#until < :now AND #exp >= :s AND #att[1].#id = :h", true),
            (
                "#l.#until >= :now OR #exp <> :s OR NOT (#att[1].#id = :h)",
                false,
            ),
            // AND binds tighter than OR.
            ("#exp >= :s OR #l.#until >= :now AND #att[0].#id = :h", true),
            (
                "(#exp >= :s OR #l.#until >= :now) AND #att[0].#id = :h",
                false,
            ),
            (
                "attribute_exists(#l) AND attribute_not_exists(#att[2].#id) AND #exp <= :s AND #l.#until > :s AND :now > :s",
                true,
            ),
            // A comparison with an absent side is false, but for <>.
            (
                "#att[5].#id = :h OR #att[5].#id < :h OR #l.#until > :h",
                false,
            ),
            (
                "#att[5].#id <> :h AND NOT NOT begins_with(#att[0].#id, :h) OR #exp = :s",
                true,
            ),
        ];
        for (expression, expected) in cases {
            assert_eq!(
                check(expression, names.clone(), values.clone()),
                Ok(expected),
                "{expression}"
            );
        }
    }

    #[test]
    fn numbers_compare_by_value_and_types_never_match() {
        let values = json!({":a": {"N": "1800000100.0"}, ":b": {"S": "1800000100"}});
        let names = json!({"#e": "expires_at"});
        assert_eq!(
            check(
                "#e = :a AND NOT #e = :b AND #e <> :b",
                names.clone(),
                values.clone()
            ),
            Ok(true)
        );
        assert_eq!(check("#e < :b OR #e >= :b", names, values), Ok(false));
    }

    #[test]
    fn placeholders_must_be_declared_and_used() {
        let names = object(json!({"#a": "x", "#b": "y"}));
        let unused = check_exact("attribute_exists(#a)", names, Map::new());
        assert_eq!(
            unused,
            Err(Invalid(
                "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b}"
                    .into()
            ))
        );
        let undefined = check("#a = :v", json!({"#a": "x"}), json!({}));
        assert!(
            undefined
                .unwrap_err()
                .0
                .contains("not defined; attribute value: :v")
        );
        for bad in [
            "",
            "#a =",
            "attribute_exists(#a",
            "#a = :v :v",
            "foo(#a)",
            "#a.[1] = :v",
            "#",
        ] {
            assert!(
                check(bad, json!({"#a": "x"}), json!({":v": {"N": "1"}})).is_err(),
                "{bad}"
            );
        }
    }

    fn update(text: &str, names: Value, values: Value) -> Result<Item, Invalid> {
        let (names, values) = (named_in(text, &names), named_in(text, &values));
        let parsed = parsed((&names, &values), |parser| parser.update(text))?;
        apply(&item(), &parsed)
    }

    #[test]
    fn updates_read_the_old_item_and_write_set_then_remove() {
        let names = json!({"#att": "attempts", "#l": "l:q1", "#a": "a:q2", "#n": "a:q3", "#o": "outcome", "#e": "empty"});
        let values = json!({":new": {"L": [{"M": {"id": {"S": "a3"}}}]}, ":z": {"L": []}, ":v": {"N": "7"}, ":o": {"M": {}}});
        let new = update(
            "SET #att = list_append(if_not_exists(#att, :z), :new), #a = if_not_exists(#a, :v), \
             #n = if_not_exists(#n, :v), #e = if_not_exists(#e, :z) REMOVE #l",
            names.clone(),
            values.clone(),
        )
        .unwrap();
        let attempts = new["attempts"]["L"].as_array().unwrap();
        assert_eq!(attempts.len(), 3);
        assert_eq!(attempts[2]["M"]["id"], json!({"S": "a3"}));
        assert_eq!(
            new["a:q2"],
            item()["a:q2"],
            "if_not_exists keeps what is there"
        );
        assert_eq!(new["a:q3"], json!({"N": "7"}));
        assert_eq!(new["empty"], json!({"L": []}));
        assert!(!new.contains_key("l:q1"));

        let nested = update(
            "REMOVE #l SET #att[1].#o = :o",
            json!({"#att": "attempts", "#l": "l:q1", "#o": "outcome"}),
            json!({":o": {"M": {}}}),
        )
        .unwrap();
        assert_eq!(nested["attempts"]["L"][1]["M"]["outcome"], json!({"M": {}}));
        assert_eq!(nested["attempts"]["L"][1]["M"]["id"], json!({"S": "a2"}));
    }

    #[test]
    fn updates_refuse_what_dynamodb_refuses() {
        let names = json!({"#att": "attempts", "#o": "outcome", "#x": "missing"});
        let values = json!({":o": {"M": {}}, ":n": {"N": "1"}});
        for (text, message) in [
            ("SET #att[7].#o = :o", INVALID_PATH),
            ("SET #x.#o = :o", INVALID_PATH),
            ("SET #att = :o, #att[0].#o = :n", "overlap"),
            ("SET #att = list_append(#att, :n)", "incorrect data type"),
            ("SET #att = :o SET #o = :n", "only be used once"),
            ("ADD #att :n", "not supported"),
        ] {
            let answer = update(text, names.clone(), values.clone());
            assert!(
                answer.as_ref().is_err_and(|e| e.0.contains(message)),
                "{text}: {answer:?}"
            );
        }
    }
}
