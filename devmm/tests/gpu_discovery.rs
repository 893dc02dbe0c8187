//! Discovery of the GPU runtimes through the registry, with the fake
//! libraries behind the environment overrides, and what goes through the
//! registry on top: buffers, the DLPack conformance suite and a DLPack
//! stream handoff. One test: the overrides are process-wide and read when
//! a runtime first loads.
//!
//! With `DEVMM_GPU_SMOKE=cuda` (`scripts/gpu-smoke.sh`) the CUDA runtime is
//! the real one and the checks that read the fake's call log are left out.

mod support;

use std::sync::Arc;

use devmm::dlpack::DlpackRequest;
use devmm::mrs::cuda::CudaRuntimeMemoryResource;
use devmm::runtime::cuda::CudaRuntime;
use devmm::testing::dlpack_conformance;
use devmm::{
    DType, Device, DeviceBuffer, DeviceType, EmptyOptions, Error, MemoryResource, empty,
    get_current_memory_resource, runtime_for, runtime_names,
};
use support::fake_driver::{FakeControl, exclusive, fake_libraries};

#[test]
fn cuda_through_the_registry() {
    let on_hardware = std::env::var("DEVMM_GPU_SMOKE").is_ok_and(|v| v == "cuda");
    let _serial = exclusive();
    let fake = (!on_hardware).then(|| {
        let path = &fake_libraries().cudart;
        let fake = FakeControl::open(path);
        fake.reset();
        // SAFETY: this binary has one test, and it sets the variable before
        // anything in the process reads the environment on another thread.
        unsafe { std::env::set_var("DEVMM_CUDART_PATH", path) };
        fake
    });
    // SAFETY: as above.
    unsafe { std::env::set_var("DEVMM_HIP_PATH", "/nonexistent/libamdhip64.so") };

    // Probing opens libraries but calls nothing in them.
    let names = runtime_names();
    assert!(names.iter().any(|n| n == "cuda"), "{names:?}");
    assert!(!names.iter().any(|n| n == "rocm"), "{names:?}");
    if let Some(fake) = fake {
        let log = fake.call_log();
        assert!(log.is_empty(), "probing called the driver: {log:?}");
    }

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

    let by_name = runtime_for("cuda").unwrap();
    let count = by_name.device_count().unwrap();
    let gpu = Device::new(DeviceType::Cuda, u32::try_from(count.max(1) - 1).unwrap());
    let by_device = runtime_for(gpu).unwrap();
    let by_type = runtime_for(DeviceType::CudaManaged).unwrap();
    assert!(Arc::ptr_eq(&by_name, &by_device) && Arc::ptr_eq(&by_name, &by_type));
    let direct = CudaRuntime::load().unwrap();
    assert_eq!(
        Arc::as_ptr(&direct).cast::<()>(),
        Arc::as_ptr(&by_name).cast::<()>(),
        "the registry and CudaRuntime::load share one instance"
    );
    if fake.is_some() {
        assert_eq!(count, 2);
    }

    let mr = get_current_memory_resource(gpu).unwrap();
    let ordered = if mr.stream_ordered() {
        ", stream_ordered=true"
    } else {
        ""
    };
    assert_eq!(
        format!("{mr:?}"),
        format!("CudaRuntimeMemoryResource(device={gpu}, alignment=256{ordered})")
    );
    let mine = CudaRuntimeMemoryResource::new(Device::new(DeviceType::Cuda, 0)).unwrap();
    assert_eq!(mine.stream_ordered(), mr.stream_ordered());
    assert!(CudaRuntimeMemoryResource::new(Device::new(DeviceType::CudaHost, 0)).is_err());

    // A buffer through the registry's default resource and the runtime's copies.
    let buffer = DeviceBuffer::on_device(64, gpu).unwrap();
    let data: Vec<u8> = (0..64).collect();
    // SAFETY: the runtime's default resource hands out real device memory.
    unsafe { buffer.copy_from_host(&data).unwrap() };
    let mut back = vec![0; 64];
    // SAFETY: as above.
    unsafe { buffer.copy_to_host(&mut back).unwrap() };
    assert_eq!(back, data);
    let live = || fake.map(|f| f.live_allocations());
    assert!(matches!(live(), None | Some(1)));
    drop(buffer);
    assert!(matches!(live(), None | Some(0)));

    // The DLPack producer contract on CUDA devices, through the registry.
    for device in [gpu, Device::new(DeviceType::Cuda, 0)] {
        let report = dlpack_conformance(device);
        assert!(report.is_ok(), "{report}");
    }

    // A DLPack handoff: the export records an event on the tensor's stream
    // and makes the consumer's stream wait on it, in that order.
    let rt = runtime_for(gpu).unwrap();
    let producer = rt.create_stream(gpu).unwrap();
    let consumer = rt.create_stream(gpu).unwrap();
    let tensor = empty(
        &[4, 4],
        DType::FLOAT32,
        &EmptyOptions::new().device(gpu).stream(producer.clone()),
    )
    .unwrap();
    let clear = || fake.inspect(|f| f.clear_calls());
    clear();
    let handle = i64::try_from(consumer.handle()).unwrap();
    let export = tensor
        .to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(handle))
        .unwrap();
    if let Some(fake) = fake {
        let log = fake.call_log();
        let record = log.iter().position(|l| l.starts_with("cudaEventRecord "));
        let wait = log
            .iter()
            .position(|l| l.starts_with("cudaStreamWaitEvent "));
        let (Some(record), Some(wait)) = (record, wait) else {
            panic!("no record and wait in {log:?}");
        };
        assert!(record < wait, "{log:?}");
        let on = |line: &str, stream: &devmm::Stream| {
            line.contains(&format!("stream={:#x}", stream.handle()))
        };
        assert!(
            on(&log[record], &producer),
            "recorded on the producer: {log:?}"
        );
        assert!(on(&log[wait], &consumer), "the consumer waits: {log:?}");
    }
    consumer.synchronize().unwrap();
    // stream=-1: no synchronization at all.
    clear();
    let unsynced = tensor
        .to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(-1))
        .unwrap();
    if let Some(fake) = fake {
        let log = fake.call_log();
        assert!(
            log.iter().all(|l| !l.starts_with("cudaStreamWaitEvent")),
            "{log:?}"
        );
    }
    // stream=0 is refused on CUDA.
    assert!(tensor.to_dlpack(&DlpackRequest::new().stream(0)).is_err());
    drop((export, unsynced, tensor));
    assert!(matches!(live(), None | Some(0)));
}
