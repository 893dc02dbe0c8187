//! An installed override scope is where every override lives: guards
//! enter it, and the registry, `empty` and `DeviceBuffer::on_device` ask
//! it. Its own test binary, because a process installs one scope, once.

use std::any::Any;
use std::sync::{Arc, Mutex};

use devmm::{
    DType, Device, DeviceBuffer, EmptyOptions, MallocMemoryResource, MemoryResource, OverrideScope,
    StatisticsAdaptor, WithOrigin, get_current_memory_resource, set_override_scope,
    using_memory_resource,
};

type Stack = Arc<Mutex<Vec<Arc<dyn MemoryResource>>>>;

/// One stack for the whole process, so a thread sees another's overrides:
/// visibly not the default per-thread scope.
struct ProcessScope(Stack);

struct Pop(Stack);

impl Drop for Pop {
    fn drop(&mut self) {
        self.0.lock().unwrap().pop();
    }
}

impl OverrideScope for ProcessScope {
    fn current(&self, device: Device) -> Option<Arc<dyn MemoryResource>> {
        let stack = self.0.lock().unwrap();
        stack.iter().rev().find(|mr| mr.device() == device).cloned()
    }

    fn enter(&self, mr: Arc<dyn MemoryResource>) -> Box<dyn Any> {
        self.0.lock().unwrap().push(mr);
        Box::new(Pop(Arc::clone(&self.0)))
    }

    fn adopt_default(&self, default: Arc<dyn MemoryResource>) -> Arc<dyn MemoryResource> {
        Arc::new(WithOrigin::new(default, Arc::new("adopted")))
    }
}

#[test]
fn the_installed_scope_holds_every_override() {
    let stack = Stack::default();
    set_override_scope(ProcessScope(Arc::clone(&stack))).unwrap();
    let again = set_override_scope(ProcessScope(Stack::default())).unwrap_err();
    assert!(again.to_string().contains("already installed"), "{again}");

    // Entered from outside the registry (as Python's `with` does): seen by
    // the registry, `empty` and buffers, from any thread of this scope.
    let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
    stack.lock().unwrap().push(stats.clone());
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

    // A Rust guard enters the installed scope, and restores it on drop.
    let inner: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
    {
        let _guard = using_memory_resource(Arc::clone(&inner));
        assert_eq!(stack.lock().unwrap().len(), 2);
        assert!(Arc::ptr_eq(
            &get_current_memory_resource(Device::CPU).unwrap(),
            &inner
        ));
    }
    assert_eq!(stack.lock().unwrap().len(), 1);
    stack.lock().unwrap().clear();
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
