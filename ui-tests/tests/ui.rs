//! Every error message of devmm's macros has a compile-fail case here with
//! its `.stderr` snapshot (one folder per macro under `ui/`), and every
//! supported form compiles (`pass/`). Snapshots depend on the rustc version;
//! regenerate with `TRYBUILD=overwrite` after a toolchain bump and review.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/pass/**/*.rs");
    cases.compile_fail("tests/ui/**/*.rs");
}
