//! The current-resource registry: defaults, process-wide installs, scoped
//! per-thread overrides.

use std::sync::Arc;
use std::thread;

use devmm::mrs::cpu::{HeapMemoryResource, MallocMemoryResource};
use devmm::{
    Device, MemoryResource, StatisticsAdaptor, get_current_memory_resource, using_memory_resource,
};

fn same(a: &Arc<dyn MemoryResource>, b: &Arc<dyn MemoryResource>) -> bool {
    Arc::ptr_eq(a, b)
}

fn shared(mr: impl MemoryResource + 'static) -> Arc<dyn MemoryResource> {
    Arc::new(mr)
}

#[test]
fn overrides_nest_and_restore_even_out_of_order() {
    let (a, b) = (
        shared(HeapMemoryResource::new()),
        shared(HeapMemoryResource::new()),
    );
    let guard_a = using_memory_resource(a.clone());
    assert!(same(&get_current_memory_resource(Device::CPU).unwrap(), &a));
    let guard_b = using_memory_resource(b.clone());
    assert!(same(&get_current_memory_resource(Device::CPU).unwrap(), &b));
    drop(guard_a); // out of order: b stays in force
    assert!(same(&get_current_memory_resource(Device::CPU).unwrap(), &b));
    drop(guard_b);
    let after = get_current_memory_resource(Device::CPU).unwrap();
    assert!(!same(&after, &a) && !same(&after, &b));
}

#[test]
fn overrides_are_per_thread_and_keyed_by_device() {
    let mine = shared(StatisticsAdaptor::new(MallocMemoryResource::new()));
    let _guard = using_memory_resource(mine.clone());
    let other_thread = thread::spawn(|| get_current_memory_resource(Device::CPU).unwrap())
        .join()
        .unwrap();
    assert!(!same(&other_thread, &mine));
    assert!(same(
        &get_current_memory_resource(Device::CPU).unwrap(),
        &mine
    ));
    // A CPU override says nothing about CUDA: that lookup goes to the
    // runtime, which may be absent here, but never returns the CPU override.
    if let Ok(cuda) = get_current_memory_resource(Device::cuda(0)) {
        assert!(!same(&cuda, &mine));
    }
}

#[test]
fn the_guard_holds_a_strong_reference() {
    let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
    let guard = using_memory_resource(stats.clone());
    assert_eq!(Arc::strong_count(&stats), 3); // ours, the guard's, the stack's
    drop(guard);
    assert_eq!(Arc::strong_count(&stats), 1);
}
