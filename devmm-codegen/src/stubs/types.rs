//! Rust types as Python annotations, the way PyO3 converts them.

use std::collections::BTreeMap;

use quote::ToTokens;
use syn::{GenericArgument, PathArguments, Type};

use super::StubError;

/// Where a type appears: arguments accept more than returns produce.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Position {
    Argument,
    Return,
}

/// Python spellings of the crate's own types (pyclasses and types with a
/// ``Python type:`` doc line), by Rust identifier.
#[derive(Default)]
pub(super) struct Names {
    map: BTreeMap<String, String>,
}

impl Names {
    pub(super) fn insert(
        &mut self,
        file: &str,
        rust: String,
        python: String,
    ) -> Result<(), StubError> {
        match self.map.get(&rust) {
            Some(existing) if *existing != python => Err(StubError {
                file: file.to_owned(),
                message: format!("{rust} is both {existing} and {python} in Python; rename one"),
            }),
            _ => {
                self.map.insert(rust, python);
                Ok(())
            }
        }
    }

    pub(super) fn get(&self, rust: &str) -> Option<String> {
        let last = rust.rsplit("::").next().unwrap_or(rust).trim();
        self.map.get(last).cloned()
    }

    /// Whether `ty` is PyO3's `Python<'py>` token, which Python never passes.
    pub(super) fn is_python_token(&self, ty: &Type) -> bool {
        matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Python"))
    }

    /// The annotation for `ty`, or what is missing to write one.
    pub(super) fn annotation(&self, ty: &Type, position: Position) -> Result<String, String> {
        match ty {
            Type::Reference(r) => self.annotation(&r.elem, position),
            Type::Paren(p) => self.annotation(&p.elem, position),
            Type::Group(g) => self.annotation(&g.elem, position),
            Type::Slice(s) => self.sequence(&s.elem, position),
            Type::Tuple(t) if t.elems.is_empty() => Ok("None".into()),
            Type::Tuple(t) => {
                let items: Result<Vec<String>, String> = t
                    .elems
                    .iter()
                    .map(|e| self.annotation(e, position))
                    .collect();
                Ok(format!("tuple[{}]", items?.join(", ")))
            }
            Type::Path(p) => {
                let segment = p.path.segments.last().ok_or("an empty type path")?;
                let args: Vec<&Type> = match &segment.arguments {
                    PathArguments::AngleBracketed(a) => a
                        .args
                        .iter()
                        .filter_map(|g| match g {
                            GenericArgument::Type(t) => Some(t),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                let first = || {
                    args.first()
                        .copied()
                        .ok_or_else(|| format!("{} without a type argument", segment.ident))
                };
                let name = segment.ident.to_string();
                Ok(match name.as_str() {
                    "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64"
                    | "u128" | "usize" => "int".into(),
                    "f32" | "f64" => "float".into(),
                    "bool" => "bool".into(),
                    "String" | "str" | "char" | "Cow" => "str".into(),
                    "Self" => "Self".into(),
                    "Option" => {
                        let inner = self.annotation(first()?, position)?;
                        if inner.split(" | ").any(|member| member == "None") {
                            inner
                        } else {
                            format!("{inner} | None")
                        }
                    }
                    "Vec" => self.sequence(first()?, position)?,
                    "HashMap" | "BTreeMap" => {
                        let (Some(k), Some(v)) = (args.first(), args.get(1)) else {
                            return Err(format!("{name} without key and value types"));
                        };
                        format!("dict[{}, {}]", self.annotation(k, position)?, self.annotation(v, position)?)
                    }
                    "PyResult" | "Result" => self.annotation(first()?, position)?,
                    "Py" | "Bound" | "Borrowed" | "PyRef" | "PyRefMut" => self.annotation(first()?, position)?,
                    "PyAny" | "PyObject" => "Any".into(),
                    "PyTuple" => "tuple[Any, ...]".into(),
                    "PyBytes" => "bytes".into(),
                    "PyByteArray" => "bytearray".into(),
                    "PyString" => "str".into(),
                    "PyDict" => "dict[Any, Any]".into(),
                    "PyList" => "list[Any]".into(),
                    "PyInt" => "int".into(),
                    "PyFloat" => "float".into(),
                    "PyBool" => "bool".into(),
                    "PyType" => "type".into(),
                    _ => self.get(&name).ok_or_else(|| {
                        format!(
                            "no Python spelling for `{}`; make it a #[pyclass] or give its definition \
                             a doc line ``Python type: `...` ``",
                            ty.to_token_stream()
                        )
                    })?,
                })
            }
            other => Err(format!(
                "no Python spelling for `{}`",
                other.to_token_stream()
            )),
        }
    }

    fn sequence(&self, item: &Type, position: Position) -> Result<String, String> {
        let item = self.annotation(item, position)?;
        Ok(match position {
            Position::Argument => format!("Sequence[{item}]"),
            Position::Return => format!("list[{item}]"),
        })
    }
}
