//! Snapshots of the Python stubs: a fixture covering every form the
//! generator reads, the devmm extension itself, and the errors.

use std::fs;
use std::path::Path;

use devmm_codegen::stubs::generate;

#[test]
fn fixture_extension_stub() {
    let source = include_str!("fixtures/stubs_extension.rs");
    let stub = generate(&[("stubs_extension.rs", source)], "shapes").unwrap();
    insta::assert_snapshot!(stub);
}

#[test]
fn devmm_extension_stub() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../devmm-python/src");
    let mut files: Vec<_> = fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    // The core enum the extension exposes as an IntEnum, as build.rs adds it.
    files.insert(0, src.join("../../devmm/src/device.rs"));
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read_to_string(p).unwrap())
        })
        .collect();
    let sources: Vec<(&str, &str)> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let stub = generate(&sources, "devmm._devmm").unwrap();
    insta::assert_snapshot!(stub);
}

fn error_of(source: &str) -> String {
    generate(&[("bad.rs", source)], "bad")
        .unwrap_err()
        .to_string()
}

#[test]
fn types_without_a_python_spelling_are_errors() {
    let message = error_of("#[pyfunction]\nfn f(x: Opaque) -> usize { 0 }");
    insta::assert_snapshot!(message, @"bad.rs: f: no Python spelling for `Opaque`; make it a #[pyclass] or give its definition a doc line ``Python type: `...` ``");
}

#[test]
fn malformed_or_public_protocols_are_errors() {
    let public = error_of("/// Python protocol: `Like(a: int)`\nstruct A;");
    insta::assert_snapshot!(public, @r#"bad.rs: doc line "Python protocol: `Like(a: int)`": write ``Python protocol: `_Name(attr: type, ...)` doc``, with a private (`_`) name and at least one attribute: the protocol exists only in the stubs"#);
    let no_attributes = error_of("/// Python protocol: `_Like()`\nstruct A;");
    insta::assert_snapshot!(no_attributes, @r#"bad.rs: doc line "Python protocol: `_Like()`": write ``Python protocol: `_Name(attr: type, ...)` doc``, with a private (`_`) name and at least one attribute: the protocol exists only in the stubs"#);
    let untyped = error_of("/// Python protocol: `_Like(a)`\nstruct A;");
    insta::assert_snapshot!(untyped, @r#"bad.rs: doc line "Python protocol: `_Like(a)`": write ``Python protocol: `_Name(attr: type, ...)` doc``, with a private (`_`) name and at least one attribute: the protocol exists only in the stubs"#);
    let twice = error_of(
        "/// Python protocol: `_Like(a: int)`\nstruct A;\n/// Python protocol: `_Like(b: int)`\nstruct B;",
    );
    insta::assert_snapshot!(twice, @"bad.rs: protocol _Like is declared twice: declare it on one item and name it from the others");
}

#[test]
fn malformed_or_unfit_dataclass_declarations_are_errors() {
    let kind = error_of("/// Python dataclass: `mutable`\n#[pyclass(name = \"A\")]\nstruct A;");
    insta::assert_snapshot!(kind, @r#"bad.rs: class A: doc line "Python dataclass: `mutable`": write ``Python dataclass: `frozen` ``, for a class whose Python code declares its constructor's parameters as frozen dataclass fields"#);
    let no_constructor =
        error_of("/// Python dataclass: `frozen`\n#[pyclass(name = \"A\")]\nstruct A;");
    insta::assert_snapshot!(no_constructor, @"bad.rs: class A is declared a dataclass, but it has no #[new]: its fields are its constructor's parameters");
    let variadic = error_of(
        "/// Python dataclass: `frozen`\n#[pyclass(name = \"A\")]\nstruct A;\n\
         #[pymethods]\nimpl A {\n#[new]\n#[pyo3(signature = (*args))]\nfn new(args: &Bound<'_, PyTuple>) -> Self { A }\n}",
    );
    insta::assert_snapshot!(variadic, @"bad.rs: class A is declared a dataclass, but its constructor takes `/`, `*`, `*args` or `**kwargs`: each of its parameters is a field, given by position or by name");
    let unreadable = error_of(
        "/// Python dataclass: `frozen`\n#[pyclass(name = \"A\")]\nstruct A;\n\
         #[pymethods]\nimpl A {\n#[new]\nfn new(size: usize) -> Self { A }\n}",
    );
    insta::assert_snapshot!(unreadable, @"bad.rs: class A is declared a dataclass, but its field size (a constructor parameter) has no #[getter] on it or its bases: a dataclass reads each field back by name");
}

#[test]
fn a_base_that_is_not_a_pyclass_is_an_error() {
    let message = error_of("#[pyclass(extends = Missing)]\nstruct A;");
    insta::assert_snapshot!(message, @"bad.rs: class A extends Missing, which is not a #[pyclass] here");
}

#[test]
fn methods_of_an_unknown_class_are_an_error() {
    let message = error_of("#[pymethods]\nimpl Nowhere { fn f(&self) {} }");
    insta::assert_snapshot!(message, @"bad.rs: #[pymethods] for Nowhere, which is not a #[pyclass] seen so far");
}

#[test]
fn constants_of_unknown_type_are_an_error() {
    let message = error_of("#[pymodule]\nfn m(m: &Bound<'_, PyModule>) -> PyResult<()> { m.add(\"X\", compute())?; Ok(()) }");
    insta::assert_snapshot!(message, @"bad.rs: module constant X: cannot tell the Python type of compute (); use a string literal, String::from(..), or a #[pyclass] value");
}

#[test]
fn signatures_naming_missing_arguments_are_an_error() {
    let message = error_of("#[pyfunction]\n#[pyo3(signature = (a, b = 1))]\nfn f(a: usize) {}");
    insta::assert_snapshot!(message, @"bad.rs: f: signature names b, which is not an argument");
}

#[test]
fn sources_that_do_not_parse_are_an_error() {
    let message = error_of("fn (");
    assert!(
        message.starts_with("bad.rs: does not parse as Rust:"),
        "{message}"
    );
}

#[test]
fn annotations_naming_numpy_import_it_and_dotted_mentions_do_not() {
    let with = r#"
        /// Python type: `numpy.dtype[Any] | str`
        struct DTypeLike(u8);
        #[pyfunction]
        fn f(x: DTypeLike) {}
    "#;
    let stub = generate(&[("lib.rs", with)], "m").unwrap();
    assert!(stub.contains("\nimport numpy\n"), "{stub}");
    assert!(
        stub.contains("def f(x: numpy.dtype[Any] | str) -> None"),
        "{stub}"
    );
    let without = r#"
        /// Installs into devmm.integrations.numpy.install's handler.
        #[pyfunction]
        fn g() {}
    "#;
    let stub = generate(&[("lib.rs", without)], "m").unwrap();
    assert!(!stub.contains("import numpy"), "{stub}");
}

#[test]
fn a_python_enum_doc_line_makes_an_int_enum_class() {
    let source = r#"
        /// Colours, as an `enum.IntEnum` built at run time.
        ///
        /// Python enum: `Colour`
        enum PyColour {
            Red = 1,
            DeepBlue = 7,
        }
        #[pyfunction]
        fn favourite() -> PyColour { PyColour::Red }
        #[pymodule]
        fn m(m: &Bound<'_, PyModule>) -> PyResult<()> {
            m.add("Colour", PyColour::class(m.py())?)?;
            Ok(())
        }
    "#;
    let stub = generate(&[("lib.rs", source)], "m").unwrap();
    assert!(stub.contains("\nimport enum\n"), "{stub}");
    assert!(
        stub.contains(
            "class Colour(enum.IntEnum):\n    \"\"\"Colours, as an `enum.IntEnum` built at run time.\"\"\"\n    RED = 1\n    DEEP_BLUE = 7\n"
        ),
        "{stub}"
    );
    assert!(stub.contains("def favourite() -> Colour: ..."), "{stub}");
    assert!(stub.contains("    \"Colour\",\n"), "{stub}");
    assert!(!stub.contains("Python enum"), "{stub}");
    let missing = r#"
        /// Python enum: `Bad`
        enum PyBad { A }
    "#;
    let err = generate(&[("lib.rs", missing)], "m").unwrap_err();
    assert!(
        err.message.contains("variant A needs an explicit value"),
        "{err}"
    );
}

#[test]
fn a_python_class_doc_line_imports_the_class_and_names_it() {
    let source = r#"
        /// A core point as the Python-defined `Point`.
        ///
        /// Python class: `geometry._shapes.Point`
        struct PyPoint(u8);
        /// Python class: `geometry._shapes.Line`
        struct PyLine(u8);
        /// Python class: `geometry._units.Unit`
        struct PyUnit(u8);
        /// A point argument: a `Point` or its name.
        ///
        /// Python type: `Point | str`
        struct PointArg(u8);
        #[pyfunction]
        fn origin(near: PointArg, unit: PyUnit) -> PyPoint { PyPoint(near.0 + unit.0) }
        #[pyfunction]
        fn through(a: PyPoint) -> Vec<PyLine> { vec![PyLine(a.0)] }
    "#;
    let stub = generate(&[("lib.rs", source)], "m").unwrap();
    assert!(
        stub.contains(
            "\nfrom geometry._shapes import Line, Point\nfrom geometry._units import Unit\n"
        ),
        "{stub}"
    );
    assert!(
        stub.contains("def origin(near: Point | str, unit: Unit) -> Point: ..."),
        "{stub}"
    );
    assert!(
        stub.contains("def through(a: Point) -> list[Line]: ..."),
        "{stub}"
    );
    // Imported, not defined or exported here.
    assert!(
        !stub.contains("class Point") && !stub.contains("\"Point\""),
        "{stub}"
    );
    assert!(!stub.contains("Python class"), "{stub}");
    let undotted = "/// Python class: `Point`\nstruct PyPoint(u8);";
    let err = generate(&[("lib.rs", undotted)], "m").unwrap_err();
    assert!(
        err.message.contains("Python class: `Point`") && err.message.contains("module.Class"),
        "{err}"
    );
}

#[test]
fn init_takes_keywords_where_slot_methods_take_positions() {
    // PyO3 makes `__init__` an ordinary method (a Python subclass's
    // `super().__init__(n=...)` reaches it), but `__call__` a slot.
    let source = "#[pyclass]\nstruct A;\n#[pymethods]\nimpl A {\n    fn __init__(&self, n: usize) {}\n    fn __call__(&self, n: usize) {}\n}\n";
    let stub = generate(&[("a.rs", source)], "a").unwrap();
    assert!(
        stub.contains("def __init__(self, n: int) -> None"),
        "{stub}"
    );
    assert!(
        stub.contains("def __call__(self, n: int, /) -> None"),
        "{stub}"
    );
}

#[test]
fn a_computed_default_shows_as_the_text_signature_writes_it() {
    // `Count::of(core::CONSTANT)` is no literal; the text signature's `64`
    // is what Python shows, so the stub says it too. Without one: `...`.
    let source = "#[pyclass]\nstruct A;\n#[pymethods]\nimpl A {\n    \
        #[pyo3(signature = (n = Count::of(core::N), m = Count::of(core::M)))]\n    \
        #[pyo3(text_signature = \"($self, n=64, m)\")]\n    \
        fn f(&self, n: usize, m: usize) {}\n}\n";
    let stub = generate(&[("a.rs", source)], "a").unwrap();
    assert!(
        stub.contains("def f(self, n: int = 64, m: int = ...)"),
        "{stub}"
    );
}

/// A class `A` and a macro `m` whose rule `(matcher) => { ... }` writes a
/// `#[pymethods]` block of `transcriber`, then `invocation`.
fn block_macro(matcher: &str, transcriber: &str, invocation: &str) -> String {
    error_of(&format!(
        "#[pyclass(name = \"A\")]\nstruct A;\n\
         macro_rules! m {{ ({matcher}) => {{ #[pymethods] impl $ty {{ {transcriber} }} }}; }}\n\
         {invocation}"
    ))
}

const MATCHER: &str = "$(#[doc = $doc:literal])* $ty:ident";

#[test]
fn pymethods_macros_of_another_shape_are_errors() {
    let rules = error_of("macro_rules! m { (a) => { #[pymethods] impl A {} }; (b) => {}; }");
    insta::assert_snapshot!(rules, @"bad.rs: macro_rules! m writes #[pymethods] in one of 2 rules: the stub generator reads a macro of one rule");
    let matcher = block_macro("$ty:ty", "", "");
    insta::assert_snapshot!(matcher, @"bad.rs: macro_rules! m writes #[pymethods], but its matcher is not `$ty:ident` or `$(#[doc = $doc:literal])* $ty:ident`, the shapes the stub generator expands");
    let twice = error_of(&format!(
        "macro_rules! m {{ ({MATCHER}) => {{ #[pymethods] impl $ty {{}} }}; }}\n\
         macro_rules! m {{ ({MATCHER}) => {{ #[pymethods] impl $ty {{}} }}; }}"
    ));
    insta::assert_snapshot!(twice, @"bad.rs: macro_rules! m is defined twice: the stub generator could not tell which one an invocation expands");
}

#[test]
fn pymethods_macros_that_cannot_be_expanded_are_errors() {
    let misread = "bad.rs: m! takes `///` doc lines and a type's name, as its matcher reads";
    let cases = [
        (MATCHER, "", "m! { impl A {} }", misread),
        (MATCHER, "", "m!(#[cfg(test)] A);", misread),
        ("$ty:ident", "", "m!(/// Doc.\nA);", "bad.rs: m! takes a type's name, as its matcher reads"),
        (MATCHER, "fn f() -> $other {}", "m!(A);", "bad.rs: macro_rules! m: the stub generator expands `$ty`, `$crate` and `$(#[doc = $doc])*`, not `$other`"),
        (MATCHER, "fn", "m!(A);", "bad.rs: m!(A) expands to code that does not parse: unexpected end of input, expected identifier"),
    ];
    for (matcher, transcriber, invocation, message) in cases {
        assert_eq!(
            block_macro(matcher, transcriber, invocation),
            message,
            "{matcher} / {transcriber} / {invocation}"
        );
    }
}

#[test]
fn pymethods_macros_expand_to_the_block_they_write() {
    let source = format!(
        "#[pyclass(name = \"A\")]\nstruct A;\n\
         macro_rules! m {{ ({MATCHER}) => {{ #[pyo3::pymethods] impl $ty {{\n\
           $(#[doc = $doc])* #[new] fn new() -> Self {{ $crate::A }} }} }}; }}\n\
         m!(/// Made.\n/// Twice documented.\nA);\n\
         #[pymethods]\nimpl A {{ fn f(&self) -> usize {{ 0 }} }}\n\
         // Not one that writes #[pymethods]: ignored, as any other macro.\n\
         macro_rules! n {{ () => {{}}; }}\nn! {{}}"
    );
    let stub = generate(&[("ok.rs", &source)], "ok").unwrap();
    assert!(
        stub.contains("    def __new__(cls) -> A:\n        \"\"\"Made.\n        Twice documented.\n        \"\"\"\n    def f(self) -> int: ...\n"),
        "{stub}"
    );
}
