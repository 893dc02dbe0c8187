//! The `.api` description parser (devmm-codegen) over any text: a
//! description is parsed (and then emits a table that is valid Rust) or
//! refused with located errors, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|source: &str| {
    match devmm_codegen::parse::parse("fuzz.api", source) {
        Ok(api) => {
            let code = devmm_codegen::emit::emit(&api, "fuzz.api", "crate::driver")
                .expect("a parsed description emits");
            assert!(code.contains("pub struct"), "{code}");
        }
        Err(errors) => assert!(errors.to_string().contains("fuzz.api:"), "{errors}"),
    }
});
