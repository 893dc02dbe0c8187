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

/// The fake driver's exported entry points, as `tests/fake-driver/fake_build.rs`
/// generates them for the full fake (every role the engine implements).
fn generate_fake(file: &str, platform: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../devmm/api")
        .join(file);
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let api = devmm_codegen::parse::parse(file, &source).unwrap();
    let target = devmm_codegen::fake::FakeTarget {
        platform,
        entry: "fake_driver::entry",
        bodies: fake_driver::entry::ENTRY_POINTS,
    };
    devmm_codegen::fake::emit_fake(&api, file, &target, |_| true).unwrap()
}

#[test]
fn fake_cuda_runtime_entry_points() {
    insta::assert_snapshot!(generate_fake("cuda_runtime.api", "crate::platform::CUDA"));
}

#[test]
fn fake_hip_entry_points() {
    let code = generate_fake("hip.api", "crate::platform::HIP");
    // The same engine entry points as CUDA's, under HIP's names.
    assert!(
        code.contains(
            "fake_driver::entry::memory::malloc(&crate::platform::HIP, \"hipMalloc\", ptr, size)"
        ),
        "{code}"
    );
}

#[test]
fn every_role_has_an_entry_point_and_every_entry_point_a_role() {
    for file in ["cuda_runtime.api", "hip.api"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../devmm/api")
            .join(file);
        let api =
            devmm_codegen::parse::parse(file, &std::fs::read_to_string(path).unwrap()).unwrap();
        let roles: Vec<&str> = api
            .functions
            .iter()
            .filter_map(|f| f.role.as_deref())
            .collect();
        for (role, _) in fake_driver::entry::ENTRY_POINTS {
            assert!(
                roles.contains(role),
                "{file}: no function has the role {role}"
            );
        }
        for role in roles {
            assert!(
                fake_driver::entry::ENTRY_POINTS
                    .iter()
                    .any(|(r, _)| *r == role),
                "{file}: the fakes implement no entry point for the role {role}"
            );
        }
    }
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
