//! Python stubs (`.pyi`) generated from a PyO3 extension's own Rust source.
//!
//! The extension's `#[pyclass]`, `#[pymethods]`, `#[pyfunction]`,
//! `create_exception!` and `#[pymodule]` items are read with syn and turned
//! into one stub module, so the stubs cannot drift from the code: a Rust
//! type the generator cannot express in Python is an error, not `Any`.
//!
//! Types map as PyO3 converts them (`usize` → `int`, `Option<T>` →
//! `T | None`, `Vec<T>` → `Sequence[T]` in and `list[T]` out, a pyclass →
//! its Python name). A Rust type that converts through a custom
//! `FromPyObject` states its Python type in a doc line
//! ``Python type: `...` `` on its definition; a function or getter may state
//! its return type the same way. A Rust type that converts to and from a
//! class defined in Python (a dataclass of the package) says so in a doc
//! line ``Python class: `package.module.Class` ``: annotations name it
//! `Class` and the stub imports it from its module. A doc line
//! ``Python protocol: `_Name(attr: type, ...)` doc`` declares a
//! `typing.Protocol` that exists only in the stubs, so an annotation can
//! name a third-party type structurally, without importing its package.
//! A class whose Python code declares its constructor's parameters as its
//! frozen dataclass fields says so in a doc line
//! ``Python dataclass: `frozen` ``: its stub declares `__dataclass_fields__`
//! and `__match_args__`, so a type checker takes it for a dataclass
//! (`dataclasses.replace`, `fields`, positional `match` patterns).
//!
//! ```
//! let source = r#"
//!     /// A point.
//!     #[pyclass(frozen, name = "Point")]
//!     struct PyPoint { x: i64 }
//!     #[pymethods]
//!     impl PyPoint {
//!         #[new]
//!         fn new(x: i64) -> Self { PyPoint { x } }
//!         /// The x coordinate.
//!         #[getter]
//!         fn x(&self) -> i64 { self.x }
//!     }
//!     #[pyfunction]
//!     fn origin() -> PyPoint { PyPoint { x: 0 } }
//! "#;
//! let stub = devmm_codegen::stubs::generate(&[("point.rs", source)], "points")?;
//! assert!(stub.contains("@final\nclass Point:\n    \"\"\"A point.\"\"\""));
//! assert!(stub.contains("def __new__(cls, x: int) -> Point: ..."));
//! assert!(stub.contains("    @property\n    def x(self) -> int:\n        \"\"\"The x coordinate.\"\"\""));
//! assert!(stub.contains("def origin() -> Point: ..."));
//! # Ok::<(), devmm_codegen::stubs::StubError>(())
//! ```

mod block_macros;
mod emit;
mod model;
mod types;

use std::fmt;

/// Why stubs could not be generated: the file, and what in it.
///
/// ```
/// let err = devmm_codegen::stubs::generate(&[("lib.rs", "#[pyfunction]\nfn f(x: Opaque) {}")], "m")
///     .unwrap_err();
/// assert_eq!(err.file, "lib.rs");
/// assert!(err.message.contains("no Python spelling for `Opaque`"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubError {
    /// The source file (as named by the caller).
    pub file: String,
    /// What could not be expressed, with the offending Rust text.
    pub message: String,
}

impl fmt::Display for StubError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for StubError {}

/// Generates the stub module for the extension whose source files are
/// `sources` (`(name, text)` pairs), documenting it as `module`.
///
/// Errors name the file and the item that has no Python spelling.
pub fn generate(sources: &[(&str, &str)], module: &str) -> Result<String, StubError> {
    let mut crate_model = model::Crate::default();
    let mut files = Vec::with_capacity(sources.len());
    for (name, text) in sources {
        let file = syn::parse_file(text).map_err(|e| StubError {
            file: (*name).to_owned(),
            message: format!("does not parse as Rust: {e}"),
        })?;
        files.push((*name, file));
    }
    // Two passes: first every type's Python spelling, then the signatures
    // that mention them, so files can refer to each other in any order.
    for (name, file) in &files {
        crate_model.collect_types(name, file)?;
    }
    for (name, file) in &files {
        crate_model.collect_items(name, file)?;
    }
    crate_model.check_dataclasses()?;
    Ok(emit::render(&crate_model, module))
}
