//! The parser on broken descriptions: every problem is reported with its
//! file, line and what was expected, all of them in one pass.

use devmm_codegen::api::{Availability, BaseType, Scalar};
use devmm_codegen::parse::parse;

const HEADER: &str = "api Test\ntable TestTable\nlibrary libtest.so\nenv TEST_PATH\n";

/// The messages for a description made of HEADER plus `body` (whose first
/// line is line 5).
fn errors(body: &str) -> Vec<String> {
    let source = format!("{HEADER}{body}");
    match parse("test.api", &source) {
        Ok(api) => panic!("expected errors, parsed {api:?}"),
        Err(e) => e.0.iter().map(|d| d.to_string()).collect(),
    }
}

#[test]
fn a_well_formed_description_parses() {
    let api = parse(
        "ok.api",
        &format!(
            "{HEADER}type handle_t = void*  # comment\n\n\
             fn required 1.0 int testOpen(const char* path, handle_t* out)\n\
             fn optional 12.4 unsigned long long testSize(handle_t h)\n\
             fn required 2.0 void testClose(void)\n"
        ),
    )
    .unwrap();
    assert_eq!(api.table, "TestTable");
    assert_eq!(api.libraries, ["libtest.so"]);
    assert_eq!(api.env, "TEST_PATH");
    assert_eq!(api.functions.len(), 3);
    let open = &api.functions[0];
    assert_eq!(
        open.to_string(),
        "int testOpen(const char* path, handle_t* out)"
    );
    assert!(open.params[0].ty.is_const);
    assert_eq!(open.params[1].ty.base, BaseType::Alias("handle_t".into()));
    assert_eq!(open.params[1].ty.pointers, 1);
    let size = &api.functions[1];
    assert_eq!(size.availability, Availability::Optional);
    assert_eq!(size.since.to_string(), "12.4");
    assert_eq!(size.ret.base, BaseType::Scalar(Scalar::UnsignedLongLong));
    assert!(api.functions[2].params.is_empty());
    assert!(api.functions[2].ret.is_void());
}

#[test]
fn unknown_directive() {
    assert_eq!(
        errors("function required 1.0 int f(void)\nfn required 1.0 int g(void)\n"),
        ["test.api:5: expected a directive (`api`, `table`, `library`, `env`, `type` or `fn`), found `function`"]
    );
}

#[test]
fn bad_availability_and_version() {
    assert_eq!(
        errors("fn maybe 1.0 int f(void)\nfn required 1 int g(void)\nfn optional\n"),
        [
            "test.api:5: expected `required` or `optional` after `fn`, found `maybe`",
            "test.api:6: expected a version `MAJOR.MINOR` after `required`/`optional`, found `1`",
            "test.api:7: expected a version `MAJOR.MINOR` after `required`/`optional`, found the end of the line",
        ]
    );
}

#[test]
fn unknown_type_names_the_fix() {
    assert_eq!(
        errors("fn required 1.0 int f(stream_t s)\n"),
        ["test.api:5: expected a C type, found `stream_t`; declare it first with `type stream_t = ...`"]
    );
}

#[test]
fn unnamed_parameter() {
    assert_eq!(
        errors("fn required 1.0 int f(int*, int n)\n"),
        ["test.api:5: expected a parameter name after `int*` in `f`, found `,`"]
    );
}

#[test]
fn unclosed_parameter_list() {
    assert_eq!(
        errors("fn required 1.0 int f(int a\n"),
        ["test.api:5: expected `,` or `)` in the parameters of `f`, found the end of the line"]
    );
}

#[test]
fn trailing_tokens() {
    assert_eq!(
        errors("fn required 1.0 int f(int a) const\n"),
        ["test.api:5: expected the end of the line (or `as ROLE`) after `f(...)`, found `const`"]
    );
}

#[test]
fn a_role_needs_a_name_and_belongs_to_one_function() {
    assert_eq!(
        errors(
            "fn required 1.0 int f(int a) as
"
        ),
        ["test.api:5: expected a role name after `f(...) as`, found the end of the line"]
    );
    assert_eq!(
        errors(
            "fn required 1.0 int f(void) as init
fn required 1.0 int g(void) as init
"
        ),
        ["test.api:6: role `init` is given to two functions"]
    );
}

#[test]
fn missing_parenthesis() {
    assert_eq!(
        errors("fn required 1.0 int f int a\n"),
        ["test.api:5: expected `(` after `f`, found `int`"]
    );
}

#[test]
fn void_parameter_among_others() {
    assert_eq!(
        errors("fn required 1.0 int f(void v, int a)\n"),
        ["test.api:5: expected a parameter type other than `void` in `f`; write `(void)` alone for no parameters"]
    );
}

#[test]
fn rust_keyword_names() {
    assert_eq!(
        errors("fn required 1.0 int f(int type)\n"),
        ["test.api:5: expected a parameter name that is not a Rust keyword, found `type`; rename it"]
    );
}

#[test]
fn duplicates() {
    assert_eq!(
        errors(
            "fn required 1.0 int f(int a, int a)\nfn required 1.0 int g(void)\nfn required 1.0 int g(void)\n\
             type t = int\ntype t = int\nlibrary libtest.so\ntable Other\n"
        ),
        [
            "test.api:5: parameter `a` appears twice in `f`",
            "test.api:7: function `g` is declared twice",
            "test.api:9: type `t` is already defined",
            "test.api:10: library `libtest.so` is listed twice",
            "test.api:11: `table` is given twice (first `TestTable`)",
        ]
    );
}

#[test]
fn bad_characters_and_aliases() {
    assert_eq!(
        errors("fn required 1.0 int f(int a[4])\ntype v = void\ntype w int\n"),
        [
            "test.api:5: expected a C declaration (names, `*`, `(`, `)`, `,`), found `[`",
            "test.api:6: expected a type other than plain `void` for `v`",
            "test.api:7: expected `type NAME = C-TYPE`, found `type w int`",
        ]
    );
}

#[test]
fn missing_header_lines_are_all_reported() {
    let err = parse("empty.api", "# nothing here\n\n").unwrap_err();
    let messages: Vec<String> = err.0.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        messages,
        [
            "empty.api:2: expected the `api` directive (the API's name for messages), found none in the file",
            "empty.api:2: expected the `table` directive (the generated struct's name), found none in the file",
            "empty.api:2: expected the `library` directive (a library file name to load), found none in the file",
            "empty.api:2: expected the `env` directive (the path override variable), found none in the file",
            "empty.api:2: expected the `fn` directive (at least one function), found none in the file",
        ]
    );
}

#[test]
fn bad_table_and_env_names() {
    let err = parse(
        "names.api",
        "api X\ntable My Table\nenv 1PATH\nlibrary\nfn required 1.0 int f(void)\n",
    )
    .unwrap_err();
    let messages: Vec<String> = err.0.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        messages[..3],
        [
            "names.api:2: expected the table struct's name after `table` and nothing more, found `Table`",
            "names.api:3: expected an environment variable name made of ASCII letters, digits and `_`, found `1PATH`",
            "names.api:4: expected a library file name after `library`, found the end of the line",
        ]
    );
}

#[test]
fn an_opaque_struct_by_value_and_its_refusals() {
    let api = parse(
        "ok.api",
        &format!(
            "{HEADER}type handle_t = struct 64\n\
             fn required 1.0 int testOpen(void** ptr, handle_t handle)\n"
        ),
    )
    .unwrap();
    assert_eq!(api.types[0].ty.base, BaseType::Opaque(64));
    assert_eq!(api.types[0].ty.to_string(), "struct 64");
    let code = devmm_codegen::emit::emit(&api, "ok.api", "crate::calls").unwrap();
    assert!(
        code.contains("pub type handle_t = crate::calls::Opaque<64>;"),
        "{code}"
    );
    let wanted = "test.api:5: expected `struct N`, an opaque struct of N > 0 bytes passed by \
                  value (`struct 64` for `cudaIpcMemHandle_t`)";
    for bad in ["struct 0", "struct x", "struct"] {
        assert_eq!(
            errors(&format!("type h = {bad}\nfn required 1.0 int f(void)\n")),
            [wanted],
            "{bad}"
        );
    }
}
