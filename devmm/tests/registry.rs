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

/// The one exit rule Python's `with` blocks follow too: an override ended
/// out of order ends, the later ones stay, and the call says so.
#[test]
fn an_override_ended_out_of_order_ends_and_says_so() {
    let (a, b) = (
        shared(HeapMemoryResource::new()),
        shared(HeapMemoryResource::new()),
    );
    let outer = devmm::enter_override(a.clone());
    let inner = devmm::enter_override(b.clone());
    let err = devmm::exit_override(outer).unwrap_err();
    assert_eq!(err.kind(), devmm::ErrorKind::WrongOrder);
    assert!(
        err.to_string()
            .contains("not the innermost in this context: it ended"),
        "{err}"
    );
    assert!(same(&get_current_memory_resource(Device::CPU).unwrap(), &b));
    devmm::exit_override(inner).unwrap();
    assert!(devmm::exit_override(inner).is_err());
    let after = get_current_memory_resource(Device::CPU).unwrap();
    assert!(!same(&after, &a) && !same(&after, &b));
}

/// `push_statistics` keeps its scopes in the same chain: a guard entered
/// after a push stays in force when the push is popped.
#[test]
fn pushed_statistics_share_the_chain_with_guards() {
    devmm::statistics::push_statistics(Device::CPU).unwrap();
    let pushed = get_current_memory_resource(Device::CPU).unwrap();
    let mine = shared(HeapMemoryResource::new());
    let guard = using_memory_resource(mine.clone());
    drop(devmm::DeviceBuffer::new(16, pushed.clone(), &devmm::Stream::cpu()).unwrap());
    let popped = devmm::statistics::pop_statistics(Device::CPU).unwrap();
    assert_eq!(popped.total_bytes, 16);
    assert!(same(
        &get_current_memory_resource(Device::CPU).unwrap(),
        &mine
    ));
    drop(guard);
    assert!(!same(
        &get_current_memory_resource(Device::CPU).unwrap(),
        &pushed
    ));
    assert!(devmm::statistics::pop_statistics(Device::CPU).is_none());
}
