//! Discovery of the GPU runtimes through the registry, with the fake
//! libraries behind the environment overrides. One test: the overrides are
//! process-wide and read when a runtime first loads.

mod support;

use std::sync::Arc;

use devmm::mrs::cuda::CudaRuntimeMemoryResource;
use devmm::runtime::cuda::CudaRuntime;
use devmm::{
    Device, DeviceBuffer, DeviceType, Error, MemoryResource, get_current_memory_resource,
    runtime_for, runtime_names,
};
use support::fake_driver::{FakeControl, exclusive, fake_libraries};

#[test]
fn registry_finds_loads_once_and_reports_what_is_missing() {
    let _serial = exclusive();
    let path = &fake_libraries().cudart;
    let fake = FakeControl::open(path);
    fake.reset();
    // SAFETY: this binary has one test, and it sets the variables before
    // anything in the process reads the environment on another thread.
    unsafe {
        std::env::set_var("DEVMM_CUDART_PATH", path);
        std::env::set_var("DEVMM_HIP_PATH", "/nonexistent/libamdhip64.so");
    }

    // Probing opens libraries but calls nothing in them.
    let names = runtime_names();
    assert!(names.iter().any(|n| n == "cuda"), "{names:?}");
    assert!(!names.iter().any(|n| n == "rocm"), "{names:?}");
    assert!(
        fake.call_log().is_empty(),
        "probing called the driver: {:?}",
        fake.call_log()
    );

    match runtime_for("rocm").unwrap_err() {
        Error::RuntimeUnavailable { name, reason } => {
            assert_eq!(name, "rocm");
            let prefix = "cannot load /nonexistent/libamdhip64.so (from DEVMM_HIP_PATH): ";
            assert!(reason.starts_with(prefix), "{reason}");
            assert!(
                reason.ends_with("; fix or unset DEVMM_HIP_PATH"),
                "{reason}"
            );
        }
        other => panic!("expected runtime unavailable, got {other:?}"),
    }

    let gpu = Device::new(DeviceType::Cuda, 1);
    let by_name = runtime_for("cuda").unwrap();
    let by_device = runtime_for(gpu).unwrap();
    let by_type = runtime_for(DeviceType::CudaManaged).unwrap();
    assert!(Arc::ptr_eq(&by_name, &by_device) && Arc::ptr_eq(&by_name, &by_type));
    let direct = CudaRuntime::load().unwrap();
    assert_eq!(
        Arc::as_ptr(&direct).cast::<()>(),
        Arc::as_ptr(&by_name).cast::<()>(),
        "the registry and CudaRuntime::load share one instance"
    );
    assert_eq!(by_name.device_count().unwrap(), 2);

    let mr = get_current_memory_resource(gpu).unwrap();
    assert_eq!(
        format!("{mr:?}"),
        "CudaRuntimeMemoryResource(device=cuda:1, alignment=256, stream_ordered=true)"
    );
    let mine = CudaRuntimeMemoryResource::new(Device::new(DeviceType::Cuda, 0)).unwrap();
    assert!(mine.stream_ordered());
    assert!(CudaRuntimeMemoryResource::new(Device::new(DeviceType::CudaHost, 0)).is_err());

    // A buffer through the registry's default resource and the runtime's copies.
    let buffer = DeviceBuffer::on_device(64, gpu).unwrap();
    let data: Vec<u8> = (0..64).collect();
    buffer.copy_from_host(&data).unwrap();
    let mut back = vec![0; 64];
    buffer.copy_to_host(&mut back).unwrap();
    assert_eq!(back, data);
    assert_eq!(fake.live_allocations(), 1);
    drop(buffer);
    assert_eq!(fake.live_allocations(), 0);
}
