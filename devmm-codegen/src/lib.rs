//! Build-time generators for devmm.
//!
//! - Driver tables: parses the CUDA runtime and HIP API description files
//!   kept in the repository ([`parse`], format in [`api`]) and emits typed
//!   function-table structs ([`emit`]), so no GPU SDK is needed to build
//!   devmm.
//! - Fake drivers: the same descriptions give the test doubles in `tests/`
//!   their exported C entry points ([`fake`]).
//! - Python stubs: reads the Python extension's Rust source and emits the
//!   `.pyi` files shipped with the package.
//!
//! A build script turns a description into a file to `include!`:
//!
//! ```
//! let source = "api Mini\ntable MiniTable\nlibrary libmini.so\nenv MINI_PATH\n\
//!               fn optional 2.1 void miniFlush(void)\n";
//! let code = devmm_codegen::generate_table("mini.api", source, "crate::driver")?;
//! assert!(code.contains("pub miniFlush: ::core::option::Option<unsafe extern \"C\" fn()>,"));
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```

pub mod api;
pub mod emit;
pub mod fake;
pub mod parse;
pub mod stubs;

/// Parses the description `source` (read from `file_name`) and generates
/// its table, implementing the loader trait found under `support`.
pub fn generate_table(
    file_name: &str,
    source: &str,
    support: &str,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let api = parse::parse(file_name, source)?;
    Ok(emit::emit(&api, file_name, support)?)
}
