//! The description parser: text in, [`Api`] out, or every problem at once
//! with its file, line and what was expected.
//!
//! ```
//! use devmm_codegen::parse::parse;
//! let err = parse("bad.api", "api Bad\ntable BadTable\nlibrary libbad.so\nenv BAD\n\
//!                             fn sometimes 1.0 int badInit(void)\n").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "bad.api:5: expected `required` or `optional` after `fn`, found `sometimes`"
//! );
//! ```

use std::fmt;

use crate::api::{Api, Availability, BaseType, CType, Function, Param, Scalar, TypeAlias, Version};

/// One problem in a description file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name given to [`parse`].
    pub file: String,
    /// The 1-based line.
    pub line: usize,
    /// What was expected and what was found.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// Every problem found in one pass over a description, in line order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseErrors(pub Vec<Diagnostic>);

impl fmt::Display for ParseErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseErrors {}

/// Parses the description `source`, read from `file` (used in messages).
pub fn parse(file: &str, source: &str) -> Result<Api, ParseErrors> {
    let mut p = Parser {
        file,
        errors: Vec::new(),
        name: None,
        table: None,
        libraries: Vec::new(),
        env: None,
        types: Vec::new(),
        functions: Vec::new(),
        seen: Vec::new(),
    };
    let mut last_line = 0;
    for (index, raw) in source.lines().enumerate() {
        last_line = index + 1;
        let text = raw.split('#').next().unwrap_or("").trim();
        if !text.is_empty() {
            if let Err(message) = p.directive(text) {
                p.error(last_line, message);
            }
        }
    }
    p.finish(last_line.max(1))
}

struct Parser<'a> {
    file: &'a str,
    errors: Vec<Diagnostic>,
    name: Option<String>,
    table: Option<String>,
    libraries: Vec<String>,
    env: Option<String>,
    types: Vec<TypeAlias>,
    functions: Vec<Function>,
    /// Directives that appeared, even if malformed: a broken line is
    /// reported once, not again as "missing" at the end.
    seen: Vec<String>,
}

impl Parser<'_> {
    fn error(&mut self, line: usize, message: String) {
        self.errors.push(Diagnostic {
            file: self.file.to_owned(),
            line,
            message,
        });
    }

    fn directive(&mut self, text: &str) -> Result<(), String> {
        let (word, rest) = text
            .split_once(char::is_whitespace)
            .map_or((text, ""), |(w, r)| (w, r.trim()));
        self.seen.push(word.to_owned());
        match word {
            "api" => set_once(&mut self.name, "api", nonempty(rest, "a name after `api`")?),
            "table" => {
                let name = single_word(rest, "the table struct's name after `table`")?;
                rust_ident(&name, "a table name")?;
                set_once(&mut self.table, "table", name)
            }
            "library" => {
                let name = single_word(rest, "a library file name after `library`")?;
                if self.libraries.contains(&name) {
                    return Err(format!("library `{name}` is listed twice"));
                }
                self.libraries.push(name);
                Ok(())
            }
            "env" => {
                let name = single_word(rest, "an environment variable name after `env`")?;
                c_ident(&name, "an environment variable name")?;
                set_once(&mut self.env, "env", name)
            }
            "type" => self.type_alias(rest),
            "fn" => self.function(rest),
            other => Err(format!(
                "expected a directive (`api`, `table`, `library`, `env`, `type` or `fn`), found `{other}`"
            )),
        }
    }

    fn type_alias(&mut self, rest: &str) -> Result<(), String> {
        let Some((name, ty)) = rest.split_once('=') else {
            return Err(format!(
                "expected `type NAME = C-TYPE`, found `type {rest}`"
            ));
        };
        let name = single_word(name.trim(), "an alias name before `=`")?;
        rust_ident(&name, "a type alias")?;
        if self.is_known_type(&name) {
            return Err(format!("type `{name}` is already defined"));
        }
        let mut tokens = Tokens::new(ty)?;
        let ty = self.c_type(&mut tokens)?;
        tokens.end("the end of the line after the aliased type")?;
        if ty.is_void() {
            return Err(format!(
                "expected a type other than plain `void` for `{name}`"
            ));
        }
        self.types.push(TypeAlias { name, ty });
        Ok(())
    }

    fn is_known_type(&self, name: &str) -> bool {
        self.types.iter().any(|t| t.name == name) || scalar_start(name)
    }

    fn function(&mut self, rest: &str) -> Result<(), String> {
        let mut words = rest.splitn(3, char::is_whitespace);
        let availability = match words.next().unwrap_or("") {
            "required" => Availability::Required,
            "optional" => Availability::Optional,
            "" => {
                return Err(
                    "expected `required` or `optional` after `fn`, found the end of the line"
                        .into(),
                )
            }
            other => {
                return Err(format!(
                    "expected `required` or `optional` after `fn`, found `{other}`"
                ))
            }
        };
        let since = version(words.next().unwrap_or(""))?;
        let decl = words.next().unwrap_or("").trim();
        let mut tokens = Tokens::new(decl)?;
        let ret = self.c_type(&mut tokens)?;
        let name = tokens.ident("the function name after its return type")?;
        rust_ident(&name, "a function name")?;
        if self.functions.iter().any(|f| f.name == name) {
            return Err(format!("function `{name}` is declared twice"));
        }
        tokens.punct('(', &format!("`(` after `{name}`"))?;
        let params = self.params(&mut tokens, &name)?;
        let role = if tokens.peek_word() == Some("as") {
            tokens.next();
            let role = tokens.ident(&format!("a role name after `{name}(...) as`"))?;
            rust_ident(&role, "a role name")?;
            if self
                .functions
                .iter()
                .any(|f| f.role.as_deref() == Some(role.as_str()))
            {
                return Err(format!("role `{role}` is given to two functions"));
            }
            Some(role)
        } else {
            None
        };
        tokens.end(&format!(
            "the end of the line (or `as ROLE`) after `{name}(...)`"
        ))?;
        self.functions.push(Function {
            name,
            ret,
            params,
            availability,
            since,
            role,
        });
        Ok(())
    }

    fn params(&self, tokens: &mut Tokens, function: &str) -> Result<Vec<Param>, String> {
        let mut params: Vec<Param> = Vec::new();
        if tokens.eat(')') {
            return Ok(params);
        }
        if tokens.peek_word() == Some("void") && tokens.peek_punct_at(1) == Some(')') {
            tokens.pos += 2;
            return Ok(params);
        }
        loop {
            let ty = self.c_type(tokens)?;
            if ty.is_void() {
                return Err(format!(
                    "expected a parameter type other than `void` in `{function}`; write `(void)` alone for no parameters"
                ));
            }
            let name = tokens.ident(&format!("a parameter name after `{ty}` in `{function}`"))?;
            rust_ident(&name, "a parameter name")?;
            if params.iter().any(|p| p.name == name) {
                return Err(format!("parameter `{name}` appears twice in `{function}`"));
            }
            params.push(Param { name, ty });
            match tokens.next() {
                Some(Token::Punct(',')) => continue,
                Some(Token::Punct(')')) => return Ok(params),
                other => {
                    return Err(format!(
                        "expected `,` or `)` in the parameters of `{function}`, found {}",
                        describe(other.as_ref())
                    ))
                }
            }
        }
    }

    /// `[const] BASE *...`
    fn c_type(&self, tokens: &mut Tokens) -> Result<CType, String> {
        let is_const = tokens.peek_word() == Some("const");
        if is_const {
            tokens.pos += 1;
        }
        let base = match tokens.next() {
            Some(Token::Word(w)) if w == "void" => BaseType::Void,
            Some(Token::Word(w)) if w == "struct" => {
                let bytes = match tokens.next() {
                    Some(Token::Word(n)) => n.parse::<usize>().ok().filter(|&n| n > 0),
                    _ => None,
                };
                BaseType::Opaque(bytes.ok_or_else(|| {
                    "expected `struct N`, an opaque struct of N > 0 bytes passed by value \
                     (`struct 64` for `cudaIpcMemHandle_t`)"
                        .to_owned()
                })?)
            }
            Some(Token::Word(w)) if scalar_start(&w) => BaseType::Scalar(scalar(&w, tokens)?),
            Some(Token::Word(w)) if self.types.iter().any(|t| t.name == w) => BaseType::Alias(w),
            Some(Token::Word(w)) => {
                return Err(format!(
                    "expected a C type, found `{w}`; declare it first with `type {w} = ...`"
                ))
            }
            other => {
                return Err(format!(
                    "expected a C type, found {}",
                    describe(other.as_ref())
                ))
            }
        };
        let mut pointers = 0;
        while tokens.eat('*') {
            pointers += 1;
        }
        Ok(CType {
            base,
            is_const,
            pointers,
        })
    }

    fn finish(mut self, last_line: usize) -> Result<Api, ParseErrors> {
        for (what, why) in [
            ("api", "the API's name for messages"),
            ("table", "the generated struct's name"),
            ("library", "a library file name to load"),
            ("env", "the path override variable"),
            ("fn", "at least one function"),
        ] {
            if !self.seen.iter().any(|w| w == what) {
                self.error(
                    last_line,
                    format!("expected the `{what}` directive ({why}), found none in the file"),
                );
            }
        }
        match (self.name, self.table, self.env) {
            (Some(name), Some(table), Some(env)) if self.errors.is_empty() => Ok(Api {
                name,
                table,
                libraries: self.libraries,
                env,
                types: self.types,
                functions: self.functions,
            }),
            _ => Err(ParseErrors(self.errors)),
        }
    }
}

fn set_once(slot: &mut Option<String>, what: &str, value: String) -> Result<(), String> {
    if let Some(old) = slot {
        return Err(format!("`{what}` is given twice (first `{old}`)"));
    }
    *slot = Some(value);
    Ok(())
}

fn nonempty(text: &str, expected: &str) -> Result<String, String> {
    if text.is_empty() {
        Err(format!("expected {expected}, found the end of the line"))
    } else {
        Ok(text.to_owned())
    }
}

fn single_word(text: &str, expected: &str) -> Result<String, String> {
    let text = nonempty(text, expected)?;
    match text.split_once(char::is_whitespace) {
        None => Ok(text),
        Some((_, extra)) => Err(format!(
            "expected {expected} and nothing more, found `{}`",
            extra.trim()
        )),
    }
}

fn version(text: &str) -> Result<Version, String> {
    let parsed = text
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some((major, minor)) if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
            Ok(Version { major, minor })
        }
        _ if text.is_empty() => {
            Err("expected a version `MAJOR.MINOR` after `required`/`optional`, found the end of the line".into())
        }
        _ => Err(format!(
            "expected a version `MAJOR.MINOR` after `required`/`optional`, found `{text}`"
        )),
    }
}

fn c_ident(name: &str, what: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected {what} made of ASCII letters, digits and `_`, found `{name}`"
        ))
    }
}

/// Names that become Rust identifiers must not be Rust keywords.
fn rust_ident(name: &str, what: &str) -> Result<(), String> {
    c_ident(name, what)?;
    const KEYWORDS: &[&str] = &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod",
        "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super",
        "trait", "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box",
        "do", "final", "macro", "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
        "_",
    ];
    if KEYWORDS.contains(&name) {
        Err(format!(
            "expected {what} that is not a Rust keyword, found `{name}`; rename it"
        ))
    } else {
        Ok(())
    }
}

/// Whether `word` begins one of the built-in scalar spellings.
fn scalar_start(word: &str) -> bool {
    matches!(word, "signed" | "unsigned" | "short" | "long")
        || Scalar::ALL.iter().any(|s| s.c_name() == word)
}

/// Reads a scalar whose first word is `first`, taking the longest
/// spelling that names one (`unsigned long long` before `unsigned long`).
fn scalar(first: &str, tokens: &mut Tokens) -> Result<Scalar, String> {
    let mut words = vec![first];
    for ahead in 0..2 {
        match tokens.tokens.get(tokens.pos + ahead) {
            Some(Token::Word(w)) => words.push(w),
            _ => break,
        }
    }
    for n in (1..=words.len()).rev() {
        let spelled = words[..n].join(" ");
        let found = if spelled == "unsigned" {
            Some(Scalar::UnsignedInt)
        } else {
            Scalar::ALL.into_iter().find(|s| s.c_name() == spelled)
        };
        if let Some(found) = found {
            tokens.pos += n - 1;
            return Ok(found);
        }
    }
    Err(format!("expected a C type, found `{first}`"))
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Punct(char),
}

fn describe(token: Option<&Token>) -> String {
    match token {
        None => "the end of the line".into(),
        Some(Token::Word(w)) => format!("`{w}`"),
        Some(Token::Punct(c)) => format!("`{c}`"),
    }
}

struct Tokens {
    tokens: Vec<Token>,
    pos: usize,
}

impl Tokens {
    fn new(text: &str) -> Result<Tokens, String> {
        let mut tokens = Vec::new();
        let mut chars = text.char_indices().peekable();
        while let Some(&(start, c)) = chars.peek() {
            if c.is_whitespace() {
                chars.next();
            } else if matches!(c, '*' | '(' | ')' | ',') {
                tokens.push(Token::Punct(c));
                chars.next();
            } else if c.is_ascii_alphanumeric() || c == '_' {
                let mut end = start;
                while let Some(&(i, c)) = chars.peek() {
                    if !(c.is_ascii_alphanumeric() || c == '_') {
                        break;
                    }
                    end = i + c.len_utf8();
                    chars.next();
                }
                tokens.push(Token::Word(text[start..end].to_owned()));
            } else {
                return Err(format!(
                    "expected a C declaration (names, `*`, `(`, `)`, `,`), found `{c}`"
                ));
            }
        }
        Ok(Tokens { tokens, pos: 0 })
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn peek_word(&self) -> Option<&str> {
        match self.tokens.get(self.pos) {
            Some(Token::Word(w)) => Some(w),
            _ => None,
        }
    }

    fn peek_punct_at(&self, ahead: usize) -> Option<char> {
        match self.tokens.get(self.pos + ahead) {
            Some(Token::Punct(c)) => Some(*c),
            _ => None,
        }
    }

    fn eat(&mut self, punct: char) -> bool {
        let hit = self.peek_punct_at(0) == Some(punct);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn punct(&mut self, punct: char, expected: &str) -> Result<(), String> {
        if self.eat(punct) {
            Ok(())
        } else {
            Err(format!(
                "expected {expected}, found {}",
                describe(self.tokens.get(self.pos))
            ))
        }
    }

    fn ident(&mut self, expected: &str) -> Result<String, String> {
        match self.next() {
            Some(Token::Word(w)) => Ok(w),
            other => Err(format!(
                "expected {expected}, found {}",
                describe(other.as_ref())
            )),
        }
    }

    fn end(&self, expected: &str) -> Result<(), String> {
        match self.tokens.get(self.pos) {
            None => Ok(()),
            other => Err(format!("expected {expected}, found {}", describe(other))),
        }
    }
}
