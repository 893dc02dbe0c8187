//! The generator on small descriptions: C types map to the Rust types with
//! the same ABI, and the loader's shape follows what is required.

use devmm_codegen::generate_table;

const HEADER: &str = "api Test\ntable TestTable\nlibrary libtest.so\nenv TEST_PATH\n";

fn generate(body: &str) -> String {
    generate_table("test.api", &format!("{HEADER}{body}"), "crate::support")
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn c_types_map_to_rust_types_with_the_same_abi() {
    let code = generate(
        "type handle_t = void*\n\
         fn required 1.0 void f(const char** names, const void* src, void** out, handle_t h, \
         unsigned long long n, size_t len, signed char c, double d)\n",
    );
    assert!(
        code.contains("pub type handle_t = *mut ::core::ffi::c_void;"),
        "{code}"
    );
    for param in [
        "names: *mut *const ::core::ffi::c_char",
        "src: *const ::core::ffi::c_void",
        "out: *mut *mut ::core::ffi::c_void",
        "h: handle_t",
        "n: ::core::ffi::c_ulonglong",
        "len: usize",
        "c: ::core::ffi::c_schar",
        "d: ::core::ffi::c_double",
    ] {
        assert!(code.contains(param), "{param} missing from\n{code}");
    }
    // `void` returns nothing.
    assert!(!code.contains("-> ()"), "{code}");
}

#[test]
fn every_required_symbol_is_checked_and_optional_ones_are_not() {
    let code = generate(
        "fn required 1.0 int a(void)\nfn optional 2.0 int b(void)\nfn required 3.1 int c(void)\n",
    );
    let compact: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    for (name, since) in [("a", "1.0"), ("c", "3.1")] {
        let check = format!(
            "if {name}.is_none() {{ missing .push(crate::support::MissingSymbol {{ name: \"{name}\", since: \"{since}\", }}); }}"
        );
        assert!(compact.contains(&check), "{check}\nmissing from\n{code}");
    }
    assert!(
        compact.contains("let (::core::option::Option::Some(a), ::core::option::Option::Some(c)) = (a, c) else { return ::core::result::Result::Err(missing); };"),
        "{code}"
    );
    assert!(
        !code.contains("name: \"b\""),
        "optional symbols are never missing:\n{code}"
    );
    assert!(code.contains(
        "pub b: ::core::option::Option<unsafe extern \"C\" fn() -> ::core::ffi::c_int>,"
    ));
    assert!(code.contains("const LIBRARIES: &'static [&'static str] = &[\"libtest.so\"];"));
    assert!(code.contains("const PATH_ENV: &'static str = \"TEST_PATH\";"));
    assert!(code.contains("const API: &'static str = \"Test\";"));
}

#[test]
fn an_all_optional_table_has_nothing_to_refuse() {
    let code = generate("fn optional 1.0 int a(void)\n");
    assert!(
        !code.contains("else {"),
        "no required symbol, no refusal:\n{code}"
    );
    assert!(
        code.contains("::core::result::Result::Ok(Self { a })"),
        "{code}"
    );
}

#[test]
fn a_bad_support_path_is_an_error() {
    let err = generate_table(
        "test.api",
        &format!("{HEADER}fn required 1.0 int a(void)\n"),
        "not a path!",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the support path `not a path!` is not a Rust path (unexpected token); pass one like `crate::driver`"
    );
}

#[test]
fn role_tags_fill_the_support_role_struct_and_untagged_tables_have_none() {
    let code = generate(
        "fn required 1.0 int a(void) as start\nfn optional 2.0 int b(void) as stop\n\
         fn required 1.0 int c(void)\n",
    );
    let compact: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    for piece in [
        "type Roles = crate::support::Calls;",
        "start: crate::support::Call { name: \"a\", f: self.a, },",
        "stop: self .b .map(|f| crate::support::Call { name: \"b\", f, }),",
    ] {
        assert!(compact.contains(piece), "{piece}\nmissing from\n{code}");
    }
    assert!(!compact.contains("Call { name: \"c\""), "{code}");
    let untagged = generate("fn required 1.0 int a(void)\n");
    assert!(untagged.contains("type Roles = ();"), "{untagged}");
}
