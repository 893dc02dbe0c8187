//! The process-wide half of the registry: lazy default and installs.

use std::sync::{Arc, Barrier};
use std::thread;

use devmm::mrs::cpu::HeapMemoryResource;
use devmm::{Device, MemoryResource, get_current_memory_resource, set_current_memory_resource};

fn same(a: &Arc<dyn MemoryResource>, b: &Arc<dyn MemoryResource>) -> bool {
    Arc::ptr_eq(a, b)
}

fn shared(mr: impl MemoryResource + 'static) -> Arc<dyn MemoryResource> {
    Arc::new(mr)
}

/// The only test in this file: integration test files are separate
/// processes, so changing the process-wide resource here cannot disturb the
/// tests of other files.
#[test]
fn set_current_is_process_wide_and_thread_safe() {
    let default = get_current_memory_resource(Device::CPU).unwrap();
    assert_eq!(
        format!("{default:?}"),
        "MallocMemoryResource(device=cpu:0, alignment=64)"
    );
    // Lazy default is installed once: the same instance every time.
    assert!(same(
        &default,
        &get_current_memory_resource(Device::CPU).unwrap()
    ));

    let installed = shared(HeapMemoryResource::new());
    let previous = set_current_memory_resource(installed.clone()).unwrap();
    assert!(same(&previous, &default));
    let seen = thread::spawn(|| get_current_memory_resource(Device::CPU).unwrap())
        .join()
        .unwrap();
    assert!(same(&seen, &installed));

    // Many threads reading while others install: every read is one of the
    // installed resources, never a torn value.
    let candidates: Vec<_> = (0..4).map(|_| shared(HeapMemoryResource::new())).collect();
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let candidates = candidates.clone();
            let barrier = barrier.clone();
            let installed = installed.clone();
            thread::spawn(move || {
                barrier.wait();
                for round in 0..200 {
                    if i % 2 == 0 {
                        set_current_memory_resource(candidates[(i + round) % 4].clone());
                    } else {
                        let mr = get_current_memory_resource(Device::CPU).unwrap();
                        assert!(candidates.iter().chain([&installed]).any(|c| same(c, &mr)));
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    set_current_memory_resource(default);
}
