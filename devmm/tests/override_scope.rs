//! An installed override scope is where every context's overrides live:
//! guards enter the chain it keeps, and the registry, `empty` and
//! `DeviceBuffer::on_device` ask it. Its own test binary, because a process
//! installs one scope, once.

use std::sync::{Arc, Mutex};

use devmm::{
    DType, Device, DeviceBuffer, EmptyOptions, MallocMemoryResource, MemoryResource, OverrideScope,
    Overrides, StatisticsAdaptor, WithOrigin, get_current_memory_resource, set_override_scope,
    using_memory_resource,
};

/// One chain for the whole process, so a thread sees another's overrides:
/// visibly not the default per-thread scope.
#[derive(Clone, Default)]
struct ProcessScope(Arc<Mutex<Overrides>>);

impl OverrideScope for ProcessScope {
    fn get(&self) -> Overrides {
        self.0.lock().unwrap().clone()
    }

    fn set(&self, overrides: Overrides) {
        *self.0.lock().unwrap() = overrides;
    }

    fn adopt_default(&self, default: Arc<dyn MemoryResource>) -> Arc<dyn MemoryResource> {
        Arc::new(WithOrigin::new(default, Arc::new("adopted")))
    }
}

#[test]
fn the_installed_scope_holds_every_override() {
    let scope = ProcessScope::default();
    set_override_scope(scope.clone()).unwrap();
    let again = set_override_scope(ProcessScope::default()).unwrap_err();
    assert!(again.to_string().contains("already installed"), "{again}");

    // Entered on one thread: seen by the registry, `empty` and buffers,
    // from any thread of this scope.
    let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
    let outer = devmm::enter_override(stats.clone());
    let seen = std::thread::spawn(|| get_current_memory_resource(Device::CPU).unwrap())
        .join()
        .unwrap();
    assert!(Arc::ptr_eq(
        &seen,
        &(stats.clone() as Arc<dyn MemoryResource>)
    ));
    let tensor = devmm::empty(&[4], DType::FLOAT32, &EmptyOptions::new()).unwrap();
    let buffer = DeviceBuffer::on_device(8, Device::CPU).unwrap();
    assert_eq!(stats.statistics().allocations, 2);
    drop((tensor, buffer));

    // A Rust guard enters the installed scope's chain, and ends on drop.
    let inner: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
    {
        let _guard = using_memory_resource(Arc::clone(&inner));
        assert!(Arc::ptr_eq(
            &scope.get().innermost(Device::CPU).unwrap(),
            &inner
        ));
        assert!(Arc::ptr_eq(
            &get_current_memory_resource(Device::CPU).unwrap(),
            &inner
        ));
    }
    assert!(Arc::ptr_eq(
        &get_current_memory_resource(Device::CPU).unwrap(),
        &(stats.clone() as Arc<dyn MemoryResource>)
    ));
    devmm::exit_override(outer).unwrap();
    assert!(scope.get().is_empty());
    // The lazy default is made once, adopted by the scope, and kept.
    let fallback = get_current_memory_resource(Device::CPU).unwrap();
    assert_eq!(
        format!("{fallback:?}"),
        "MallocMemoryResource(device=cpu:0, alignment=64)"
    );
    let origin = fallback.origin().and_then(|o| o.downcast_ref::<&str>());
    assert_eq!(origin, Some(&"adopted"));
    let again = get_current_memory_resource(Device::CPU).unwrap();
    assert!(Arc::ptr_eq(&fallback, &again));
}
