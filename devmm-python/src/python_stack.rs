//! The Python stack of the thread that allocates, for call sites of
//! tracked and traced allocations made from Python.

use std::sync::OnceLock;

use pyo3::prelude::*;

/// Frames deeper than this are left out of a captured Python stack.
const MAX_FRAMES: usize = 32;

/// The `devmm` package's directory: frames in it are devmm's own wrappers,
/// not the user's call site.
static PACKAGE_DIR: OnceLock<String> = OnceLock::new();

/// Installs the Python stack capture into the core, once.
pub(crate) fn install() {
    devmm::callsite::set_foreign_stack_capture(capture);
}

/// The package directory, found on first use (the package is still being
/// imported while the extension initializes).
fn package_dir(py: Python<'_>) -> &'static str {
    PACKAGE_DIR.get_or_init(|| {
        let file = py
            .import("devmm")
            .and_then(|m| m.getattr("__file__"))
            .and_then(|f| f.extract::<String>());
        match file {
            Ok(file) => std::path::Path::new(&file)
                .parent()
                .map(|p| format!("{}{}", p.display(), std::path::MAIN_SEPARATOR))
                .unwrap_or_default(),
            // No package to leave out: keep every frame.
            Err(_) => "\0".to_owned(),
        }
    })
}

/// The calling thread's Python stack, innermost first, or `None` when the
/// thread is not running Python (a Rust thread of its own).
fn capture() -> Option<Vec<devmm::callsite::Frame>> {
    // Not under a framework's lock either: the frames are looked up with
    // Python calls, which may hand the GIL over and wait for it again.
    if !crate::gil::holds_gil() || !crate::gil::may_wait_for_gil() {
        return None;
    }
    Python::attach(|py| frames(py).ok())
}

fn frames(py: Python<'_>) -> PyResult<Vec<devmm::callsite::Frame>> {
    let package = package_dir(py);
    let mut frames = Vec::new();
    let mut frame = py.import("sys")?.call_method1("_getframe", (0,))?;
    while !frame.is_none() && frames.len() < MAX_FRAMES {
        let code = frame.getattr("f_code")?;
        let file: String = code.getattr("co_filename")?.extract()?;
        if !file.starts_with(package) {
            frames.push(devmm::callsite::Frame {
                // co_qualname is Python 3.11's; co_name says less but is everywhere.
                function: code
                    .getattr("co_qualname")
                    .or_else(|_| code.getattr("co_name"))?
                    .extract()?,
                line: frame.getattr("f_lineno")?.extract().ok(),
                file: Some(file),
            });
        }
        frame = frame.getattr("f_back")?;
    }
    Ok(frames)
}
