//! A chain of adaptors 100,000 deep, built, used and dropped in pure Rust
//! on a thread with the default 2 MiB stack: nothing may overflow the
//! native stack (issue 33). Each case runs in a child process, so an
//! overflow (an abort) fails the case instead of killing the test binary.

use std::process::Command;
use std::sync::Arc;

use devmm::{
    Device, DeviceBuffer, Error, LimitingAdaptor, MallocMemoryResource, MemoryResource,
    StatisticsAdaptor, Stream,
};

const DEPTH: usize = 100_000;
const CHILD_ENV: &str = "DEVMM_TEST_DEEP_CHAIN_CHILD";

/// `DEPTH` adaptors of two kinds over the malloc resource, built without
/// asking any link a probe on the way.
fn deep_chain() -> Arc<dyn MemoryResource> {
    on(Arc::new(MallocMemoryResource::new()))
}

/// [`deep_chain`] over `base`.
fn on(base: Arc<dyn MemoryResource>) -> Arc<dyn MemoryResource> {
    let mut top = base;
    for level in 0..DEPTH {
        top = match level % 2 {
            0 => Arc::new(StatisticsAdaptor::new(top)),
            _ => Arc::new(LimitingAdaptor::new(top, usize::MAX)),
        };
    }
    top
}

/// Runs `case` on a thread with the default stack size (2 MiB, the size
/// `std::thread::spawn` gives), in a child process of this test binary.
fn in_child_on_a_default_stack(name: &str, case: fn()) {
    if std::env::var_os(CHILD_ENV).is_some() {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(case)
            .unwrap()
            .join()
            .unwrap();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} ended with {}: {stderr}",
        out.status
    );
    // The filter matched the one test: the child really ran it.
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

#[test]
fn a_deep_chain_is_built_and_dropped_without_overflowing_the_stack() {
    in_child_on_a_default_stack(
        "a_deep_chain_is_built_and_dropped_without_overflowing_the_stack",
        || {
            let base: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
            let weak = Arc::downgrade(&base);
            let top = on(base);
            drop(top);
            let base = weak;
            assert!(base.upgrade().is_none(), "every link was let go");
        },
    );
}

/// Allocating through the whole chain would take a native frame group per
/// link: the core refuses it at its depth limit with a typed error naming
/// the chain, and the chain still answers its probes and drops cleanly.
#[test]
fn a_deep_chain_refuses_to_allocate_with_a_typed_error() {
    in_child_on_a_default_stack(
        "a_deep_chain_refuses_to_allocate_with_a_typed_error",
        || {
            let top = deep_chain();
            assert_eq!(top.device(), Device::CPU, "probed from the top first");
            assert_eq!(top.guaranteed_alignment(), 64);
            let s = Stream::cpu();
            let refused = top.allocate(64, &s).unwrap_err();
            let Error::ChainTooDeep {
                operation,
                device,
                limit,
                chain,
            } = &refused
            else {
                panic!("{refused:?}");
            };
            assert_eq!((*operation, *device), ("allocate", Device::CPU));
            assert!(*limit >= 100 && *limit < DEPTH, "{limit}");
            assert!(
                chain.starts_with("StatisticsAdaptor -> LimitingAdaptor"),
                "{chain}"
            );
            assert!(
                refused.to_string().contains("build a shorter chain"),
                "{refused}"
            );
            let buffer = DeviceBuffer::new(8, top.clone(), &s).unwrap_err();
            assert!(matches!(buffer, Error::ChainTooDeep { .. }), "{buffer:?}");
            assert!(matches!(
                top.available_memory(),
                Err(Error::ChainTooDeep { .. })
            ));
            // SAFETY: refused before any link is asked to free anything.
            let freed = unsafe { top.deallocate(devmm::DevicePtr::from_addr(0x1000), 64, &s) };
            assert!(
                matches!(freed, Err(Error::ChainTooDeep { .. })),
                "{freed:?}"
            );
            assert_eq!(top.live_count(), None, "unknown through a chain too deep");
            drop(top);
        },
    );
}

/// The depth limit is the core's: a chain of 100 allocates, counts and
/// frees as ever.
#[test]
fn a_chain_within_the_limit_allocates() {
    let mut top: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
    for _ in 0..100 {
        top = Arc::new(StatisticsAdaptor::new(top));
    }
    let s = Stream::cpu();
    let p = top.allocate(64, &s).unwrap();
    // SAFETY: freed once with the size it was allocated with.
    unsafe { top.deallocate(p, 64, &s).unwrap() };
}
