//! Snapshots of the code generated for the description files devmm ships.
//! A change to the generator or to a description shows up as a reviewed
//! snapshot diff (`cargo insta review`), never as a silent rewrite: CI runs
//! with `INSTA_UPDATE=no`.

use std::path::Path;

fn generate(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../devmm/api")
        .join(file);
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    devmm_codegen::generate_table(file, &source, "crate::runtime::gpu::calls")
        .unwrap_or_else(|e| panic!("{file} does not generate:\n{e}"))
}

#[test]
fn cuda_runtime_table() {
    insta::assert_snapshot!(generate("cuda_runtime.api"));
}

#[test]
fn hip_table() {
    insta::assert_snapshot!(generate("hip.api"));
}

#[test]
fn every_unsafe_block_has_a_safety_comment() {
    for file in ["cuda_runtime.api", "hip.api"] {
        let code = generate(file);
        let lines: Vec<&str> = code.lines().collect();
        let mut blocks = 0;
        for (i, line) in lines.iter().enumerate() {
            if line.contains("unsafe {") {
                blocks += 1;
                assert!(
                    i > 0 && lines[i - 1].trim_start().starts_with("// SAFETY: "),
                    "{file}: line {} has no SAFETY comment above it: {line}",
                    i + 1
                );
            }
        }
        let functions = code.matches("lookup(c\"").count();
        assert_eq!(blocks, functions, "{file}: one unsafe block per symbol");
    }
}
