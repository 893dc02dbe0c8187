//! `Tensor::to` over the fake CUDA runtime and HIP library, through the
//! registry: host to device, device to host and within a device, for
//! padded and permuted layouts, each checked element by element against
//! the bytes on the device; the copy's ordering after the source's stream
//! and before the source's release; and the pairs devmm refuses. One test:
//! the library overrides are process-wide and read when a runtime loads.

mod support;

use devmm::{
    Aligned, ColMajor, DType, Device, EmptyOptions, Error, Layout, LayoutPolicy, Permuted,
    RowMajor, Stream, Tensor, empty, runtime_for,
};
use support::fake_driver::{FakeControl, exclusive, fake_libraries};
use support::strided::{expected, fill, values, values_anywhere};

fn host(shape: &[usize], policy: impl LayoutPolicy) -> Tensor {
    let t = empty(
        shape,
        DType::UINT32,
        &EmptyOptions::new().layout(policy).device(Device::CPU),
    )
    .unwrap();
    fill(&t);
    t
}

fn layout(shape: &[usize], policy: impl LayoutPolicy + Clone, device: Device) -> Layout {
    policy.layout(shape, DType::UINT32, device).unwrap()
}

fn copies_every_layout_both_ways(gpu: Device) {
    let shape = [3, 5];
    let padded = host(&shape, Aligned::new(RowMajor, 64, 64).unwrap());
    let on_gpu = padded.to(gpu, None, None).unwrap();
    assert_eq!((on_gpu.device(), on_gpu.strides()), (gpu, padded.strides()));
    assert_eq!(
        values_anywhere(&on_gpu),
        expected(15),
        "{gpu}: host to device, row by row"
    );
    let back = on_gpu
        .to(
            Device::CPU,
            None,
            Some(layout(&shape, ColMajor, Device::CPU)),
        )
        .unwrap();
    assert_eq!(
        values(&back),
        expected(15),
        "{gpu}: device to host, element by element"
    );

    let permuted = host(&[2, 3, 4], Permuted::new([2, 0, 1]));
    let dense = permuted
        .to(gpu, None, Some(layout(&[2, 3, 4], RowMajor, gpu)))
        .unwrap();
    assert_eq!(
        values_anywhere(&dense),
        expected(24),
        "{gpu}: host to device, transposed"
    );
    let same = permuted.to(gpu, None, None).unwrap();
    assert_eq!(
        values_anywhere(&same),
        expected(24),
        "{gpu}: host to device, one run"
    );
    let aligned = layout(
        &[2, 3, 4],
        Aligned::new(Permuted::new([1, 2, 0]), 128, 256).unwrap(),
        gpu,
    );
    let within = same.to(gpu, None, Some(aligned.clone())).unwrap();
    assert_eq!(within.layout(), &aligned);
    assert_eq!(
        values_anywhere(&within),
        expected(24),
        "{gpu}: within the device"
    );
    let home = within.to_read_only().to(Device::CPU, None, None).unwrap();
    assert_eq!(
        (home.strides(), values(&home)),
        (aligned.strides(), expected(24))
    );
    assert!(!home.is_read_only());
}

fn orders_the_copy_after_the_source_and_before_its_release(fake: &FakeControl, gpu: Device) {
    let runtime = runtime_for(gpu).unwrap();
    let (s1, s2) = (
        runtime.create_stream(gpu).unwrap(),
        runtime.create_stream(gpu).unwrap(),
    );
    let on = |stream: &Stream| EmptyOptions::new().device(gpu).stream(stream.clone());

    // The source is written on s1 (a device copy, asynchronous), held
    // back; the copy on s2 must wait for it. Its values (elements 32 to 39
    // of the staging tensor) are on no block freed earlier, which the pool
    // may hand out again as the source.
    let staging = host(&[40], RowMajor).to(gpu, None, None).unwrap();
    let data = expected(40)[32..].to_vec();
    let src = empty(&[8], DType::UINT32, &on(&s1).layout(RowMajor)).unwrap();
    let tail = staging.data_ptr().offset(32 * 4).unwrap();
    fake.hold_work(true);
    // SAFETY: the source and the last 32 bytes of the staging tensor, live
    // allocations of the fake device.
    unsafe { runtime.copy_device_to_device(src.data_ptr(), tail, 32, &s1) }.unwrap();
    fake.hold_work(false);
    let copy = src.to(gpu, Some(&s2), None).unwrap();
    fake.release_work();
    assert_eq!(
        values_anywhere(&copy),
        data,
        "{gpu}: the copy waited for s1"
    );
    s1.synchronize().unwrap();

    // The copy on s2 is held back; the source, released on s1 at once,
    // must not be freed under it.
    fake.hold_work(true);
    let copy = src.to(gpu, Some(&s2), None).unwrap();
    fake.hold_work(false);
    drop(src);
    fake.release_work();
    assert_eq!(
        values_anywhere(&copy),
        data,
        "{gpu}: the release waited for the copy"
    );
}

/// A copy on a stream being captured is refused before anything is
/// allocated: its result would be a graph allocation that nothing in the
/// graph frees (devmm refuses frees during a capture), and the copy itself
/// or its hand-back to the source's stream is refused midway anyway. The
/// capture stays intact.
fn refuses_a_capturing_stream_before_allocating(fake: &FakeControl, gpu: Device) {
    let prefix = if gpu.ty() == devmm::DeviceType::Cuda {
        "cuda"
    } else {
        "hip"
    };
    type Begin = unsafe extern "C" fn(*mut std::ffi::c_void, i32) -> i32;
    type End = unsafe extern "C" fn(*mut std::ffi::c_void, *mut *mut std::ffi::c_void) -> i32;
    type Destroy = unsafe extern "C" fn(*mut std::ffi::c_void) -> i32;
    // SAFETY: the runtime API's signatures of these three calls.
    let (begin, end, destroy) = unsafe {
        (
            fake.function::<Begin>(&format!("{prefix}StreamBeginCapture")),
            fake.function::<End>(&format!("{prefix}StreamEndCapture")),
            fake.function::<Destroy>(&format!("{prefix}GraphDestroy")),
        )
    };
    let runtime = runtime_for(gpu).unwrap();
    let stream = runtime.create_stream(gpu).unwrap();
    let on_host = host(&[8], RowMajor);
    let on_gpu = on_host.to(gpu, None, None).unwrap();
    let handle = std::ptr::without_provenance_mut(stream.handle());
    // SAFETY: a live stream; mode 0 is global.
    assert_eq!(unsafe { begin(handle, 0) }, 0);
    let live = fake.live_allocations();
    fake.clear_calls();
    for (source, to) in [(&on_host, gpu), (&on_gpu, gpu), (&on_gpu, Device::CPU)] {
        let err = source.to(to, Some(&stream), None).unwrap_err();
        assert!(
            matches!(err, Error::StreamCapture { .. }),
            "{gpu} -> {to}: {err:?}"
        );
    }
    let allocations: Vec<String> = fake
        .call_log()
        .into_iter()
        .filter(|l| l.starts_with(&format!("{prefix}Malloc")))
        .collect();
    assert!(
        allocations.is_empty(),
        "{gpu}: allocated during the capture: {allocations:?}"
    );
    assert_eq!(fake.live_allocations(), live, "{gpu}");
    let mut graph = std::ptr::null_mut();
    // SAFETY: the stream began capturing above; `graph` is valid for a write.
    let ended = unsafe { end(handle, &mut graph) };
    assert_eq!(ended, 0, "{gpu}: the capture broke");
    if !graph.is_null() {
        // SAFETY: the graph the capture made, destroyed once.
        assert_eq!(unsafe { destroy(graph) }, 0);
    }
}

fn refuses_what_it_cannot_copy(gpu: Device, other: Device) {
    let on_gpu = host(&[2], RowMajor).to(gpu, None, None).unwrap();
    for to in [Device::new(gpu.ty(), 1), other] {
        let err = on_gpu.to(to, None, None).unwrap_err();
        assert!(
            matches!(err, Error::CannotCopy { from, to: asked, .. } if from == gpu && asked == to),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("cannot copy a tensor from {gpu} to {to}: ")),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("copy through the host: .to(cpu:0).to({to})")),
            "{text}"
        );
    }
    let wrong = host(&[2], RowMajor)
        .to(gpu, Some(&Stream::cpu()), None)
        .unwrap_err();
    assert!(matches!(wrong, Error::Refused { .. }), "{wrong:?}");
    assert!(
        wrong
            .to_string()
            .contains(&format!("pass a stream of {gpu}")),
        "{wrong}"
    );
}

#[test]
fn copies_over_the_fake_cuda_and_hip_libraries() {
    let _serial = exclusive();
    let fakes = fake_libraries();
    let (cuda, hip) = (
        FakeControl::open(&fakes.cudart),
        FakeControl::open(&fakes.hip),
    );
    cuda.reset();
    hip.reset();
    // SAFETY: this binary has one test, and it sets the variables before
    // anything in the process reads the environment on another thread.
    unsafe {
        std::env::set_var("DEVMM_CUDART_PATH", &fakes.cudart);
        std::env::set_var("DEVMM_HIP_PATH", &fakes.hip);
    }
    for (fake, gpu, other) in [
        (cuda, Device::cuda(0), Device::rocm(0)),
        (hip, Device::rocm(0), Device::cuda(0)),
    ] {
        copies_every_layout_both_ways(gpu);
        orders_the_copy_after_the_source_and_before_its_release(fake, gpu);
        refuses_what_it_cannot_copy(gpu, other);
        refuses_a_capturing_stream_before_allocating(fake, gpu);
    }
}
