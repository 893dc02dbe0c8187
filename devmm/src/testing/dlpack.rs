//! `dlpack_conformance`: the DLPack producer contract, checked on one device
//! through its current resource, without touching its memory.

use std::fmt;
use std::sync::{Arc, Mutex};

use crate::DevicePtr;
use crate::device::{Device, DeviceType};
use crate::dlpack::ffi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_IS_COPIED,
    DLPACK_FLAG_BITMASK_READ_ONLY,
};
use crate::dlpack::{DlpackExport, DlpackFlavor, DlpackRequest};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{Aligned, ColMajor, DeviceOptimal, LayoutPolicy, Permuted, RowMajor};
use crate::ledger::Checked;
use crate::registry::get_current_memory_resource;
use crate::resource::MemoryResource;
use crate::stream::Stream;
use crate::tensor::{EmptyOptions, Tensor, empty};

use super::report::{CheckResult, ConformanceReport, ensure};

/// A shape, a dtype and the policy that lays it out.
type Specimen = (Vec<usize>, DType, Arc<dyn LayoutPolicy>);

/// The tensors every field check exports: plain, transposed, permuted,
/// padded, device-preferred, scalar, and odd dtypes.
fn specimens() -> Result<Vec<Specimen>, String> {
    let padded = Aligned::new(RowMajor, 128, 256).map_err(|e| format!("Aligned failed: {e}"))?;
    Ok(vec![
        (vec![2, 3], DType::FLOAT32, Arc::new(RowMajor)),
        (vec![3, 4], DType::INT16, Arc::new(ColMajor)),
        (
            vec![2, 3, 4],
            DType::FLOAT64,
            Arc::new(Permuted::new([2, 0, 1])),
        ),
        (vec![4, 3], DType::FLOAT32, Arc::new(padded)),
        (vec![5, 7], DType::BFLOAT16, Arc::new(DeviceOptimal)),
        (vec![], DType::COMPLEX128, Arc::new(RowMajor)),
        (vec![9], DType::BOOL, Arc::new(RowMajor)),
    ])
}

/// The resource the suite allocates from: one behind a ledger that logs
/// every release asked of it before the ledger rules on it, so a second
/// release shows even where it is refused, and never reaches a resource
/// that would not refuse it. It reads as the resource it wraps in errors.
struct Released {
    checked: Checked<Arc<dyn MemoryResource>>,
    /// `(address, bytes)` of each release asked, in order.
    log: Mutex<Vec<(usize, usize)>>,
}

impl Released {
    fn new(inner: Arc<dyn MemoryResource>) -> Released {
        Released {
            checked: Checked::new(inner),
            log: Mutex::new(Vec::new()),
        }
    }

    fn log(&self) -> Vec<(usize, usize)> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl fmt::Debug for Released {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.checked.fmt(f)
    }
}

impl MemoryResource for Released {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        self.checked.allocate(nbytes, stream)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.push((ptr.addr(), nbytes));
        drop(log);
        // SAFETY: the caller's contract, which the ledger checks before the
        // wrapped resource sees the pointer.
        unsafe { self.checked.deallocate(ptr, nbytes, stream) }
    }

    crate::resource::forward_transparent_probes!(checked);

    fn detects_misuse(&self) -> bool {
        true
    }

    fn live_count(&self) -> Option<usize> {
        self.checked.live_count()
    }
}

/// Everything the checks share: the device, its current resource (the one
/// `empty` allocates from there), logged, and its default stream.
struct Bench {
    device: Device,
    resource: Arc<Released>,
    stream: Stream,
}

impl Bench {
    fn new(device: Device) -> Result<Bench> {
        let stream = crate::runtime::runtime_for(device)?.default_stream(device)?;
        let current = get_current_memory_resource(device)?;
        Ok(Bench {
            device,
            resource: Arc::new(Released::new(current)),
            stream,
        })
    }

    fn tensor(
        &self,
        shape: &[usize],
        dtype: DType,
        policy: Arc<dyn LayoutPolicy>,
    ) -> Result<Tensor, String> {
        let options = EmptyOptions::new()
            .layout_shared(policy)
            .device(self.device)
            .resource(self.resource.clone())
            .stream(self.stream.clone());
        empty(shape, dtype, &options).map_err(|e| format!("empty({shape:?}, {dtype}) failed: {e}"))
    }

    fn plain(&self) -> Result<Tensor, String> {
        self.tensor(&[2, 3], DType::FLOAT32, Arc::new(RowMajor))
    }

    /// A `dl_device` that is not this bench's device.
    fn other_device(&self) -> (i32, i32) {
        if self.device.ty() == DeviceType::Cpu {
            Device::cuda(0).dlpack_device()
        } else {
            Device::CPU.dlpack_device()
        }
    }
}

fn export(tensor: &Tensor, request: &DlpackRequest) -> Result<DlpackExport, String> {
    tensor
        .to_dlpack(request)
        .map_err(|e| format!("to_dlpack({request:?}) failed: {e}"))
}

/// Checks that `request` is refused with `Error::Dlpack`.
fn expect_refusal(tensor: &Tensor, request: &DlpackRequest, what: &str) -> Result<String, String> {
    match tensor.to_dlpack(request) {
        Err(Error::Dlpack { reason }) => Ok(reason),
        Err(other) => Err(format!("{what} failed with {other:?}, not Error::Dlpack")),
        Ok(_) => Err(format!("{what} was exported; it must be refused")),
    }
}

/// Compares every field a consumer reads with the tensor.
fn fields_match(tensor: &Tensor, export: &DlpackExport) -> Result<(), String> {
    let t = export.dl_tensor();
    let what = format!("{:?} export of {tensor:?}", export.flavor());
    ensure(t.data as usize == tensor.data_ptr().addr(), || {
        format!(
            "{what}: data is {:p}, the first element is at {}",
            t.data,
            tensor.data_ptr()
        )
    })?;
    ensure(t.byte_offset == 0, || {
        format!("{what}: byte_offset is {}", t.byte_offset)
    })?;
    let (device_type, device_id) = tensor.device().dlpack_device();
    ensure(
        (t.device.device_type, t.device.device_id) == (device_type, device_id),
        || format!("{what}: device is {:?}", t.device),
    )?;
    let dtype = tensor.dtype();
    ensure(
        (t.dtype.code, t.dtype.bits, t.dtype.lanes)
            == (dtype.code() as u8, dtype.bits(), dtype.lanes()),
        || format!("{what}: dtype is {:?}", t.dtype),
    )?;
    ensure(usize::try_from(t.ndim) == Ok(tensor.shape().len()), || {
        format!("{what}: ndim is {}", t.ndim)
    })?;
    ensure(!t.shape.is_null() && !t.strides.is_null(), || {
        format!("{what}: shape or strides is null; both must be explicit")
    })?;
    let as_i64 = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    ensure(export.shape() == as_i64(tensor.shape()), || {
        format!("{what}: shape is {:?}", export.shape())
    })?;
    ensure(export.strides() == as_i64(tensor.strides()), || {
        format!("{what}: strides are {:?}", export.strides())
    })?;
    Ok(())
}

type BenchCheck = fn(&Bench) -> CheckResult;

/// Runs the DLPack producer contract for tensors on `device` and reports
/// every check by name.
///
/// The tensors come from `device`'s current resource, as
/// [`empty`](crate::empty) makes them: scope one with
/// [`using_memory_resource`](crate::using_memory_resource) to check a
/// runtime with a particular resource. The suite needs the device's runtime
/// (for streams) and a working resource, but never reads or writes the
/// memory. Checks: `versioned_flavor`, `legacy_flavor`, `field_fidelity`,
/// `zero_size`, `read_only`, `refuse_copy`, `refuse_dl_device`,
/// `refuse_freed`, `stream_handoff`, `deleter_lifetime`, `raw_deleter`.
///
/// ```
/// use std::sync::Arc;
/// use devmm::testing::{dlpack_conformance, RecordingMemoryResource};
/// use devmm::{using_memory_resource, Device};
///
/// let report = dlpack_conformance(Device::CPU);
/// assert!(report.is_ok(), "{report}");
///
/// // A resource of your own: its pointers need not even be memory.
/// let recording = Arc::new(RecordingMemoryResource::on_device(Device::CPU));
/// let _scope = using_memory_resource(recording.clone());
/// assert!(dlpack_conformance(Device::CPU).is_ok());
/// assert!(!recording.calls().is_empty() && recording.live().is_empty());
/// ```
pub fn dlpack_conformance(device: Device) -> ConformanceReport {
    let mut report = ConformanceReport::new("dlpack_conformance", device.to_string());
    let checks: [(&'static str, BenchCheck); 11] = [
        ("versioned_flavor", versioned_flavor),
        ("legacy_flavor", legacy_flavor),
        ("field_fidelity", field_fidelity),
        ("zero_size", zero_size),
        ("read_only", read_only),
        ("refuse_copy", refuse_copy),
        ("refuse_dl_device", refuse_dl_device),
        ("refuse_freed", refuse_freed),
        ("stream_handoff", stream_handoff),
        ("deleter_lifetime", deleter_lifetime),
        ("raw_deleter", raw_deleter),
    ];
    for (name, check) in checks {
        report.run(name, || {
            let bench = Bench::new(device).map_err(|e| format!("{device} is unusable: {e}"))?;
            check(&bench)
        });
    }
    report
}

fn versioned_flavor(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?;
    // Stamped no newer than a 1.x consumer reads, else with ours, (1, 1).
    for ((major, minor), stamped) in [
        ((1, 0), (1, 0)),
        ((1, 1), (1, 1)),
        ((1, 9), (1, 1)),
        ((2, 0), (1, 1)),
    ] {
        let request = DlpackRequest::new().max_version(major, minor);
        let export = export(&tensor, &request)?;
        ensure(export.flavor() == DlpackFlavor::Versioned, || {
            format!(
                "max_version=({major}, {minor}) got a {:?} export",
                export.flavor()
            )
        })?;
        ensure(export.version() == Some(stamped), || {
            format!(
                "max_version=({major}, {minor}) got version {:?}, not {stamped:?}",
                export.version()
            )
        })?;
        ensure(export.flags() == 0, || {
            format!("a writable tensor's export has flags {:#x}", export.flags())
        })?;
    }
    Ok(None)
}

fn legacy_flavor(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?;
    for request in [DlpackRequest::new(), DlpackRequest::new().max_version(0, 8)] {
        let export = export(&tensor, &request)?;
        ensure(export.flavor() == DlpackFlavor::Legacy, || {
            format!("{request:?} got a {:?} export", export.flavor())
        })?;
        ensure(export.version().is_none(), || {
            format!("a legacy export claims version {:?}", export.version())
        })?;
    }
    Ok(None)
}

fn field_fidelity(bench: &Bench) -> CheckResult {
    for (shape, dtype, policy) in specimens()? {
        let tensor = bench.tensor(&shape, dtype, policy)?;
        for request in [DlpackRequest::new(), DlpackRequest::new().max_version(1, 1)] {
            fields_match(&tensor, &export(&tensor, &request)?)?;
        }
    }
    Ok(None)
}

fn zero_size(bench: &Bench) -> CheckResult {
    for shape in [&[0, 3][..], &[4, 0, 2], &[0]] {
        let tensor = bench.tensor(shape, DType::FLOAT32, Arc::new(RowMajor))?;
        for request in [DlpackRequest::new(), DlpackRequest::new().max_version(1, 1)] {
            let export = export(&tensor, &request)?;
            ensure(export.dl_tensor().data.is_null(), || {
                format!(
                    "the zero-size {shape:?} export has data {:p}, not null",
                    export.dl_tensor().data
                )
            })?;
            fields_match(&tensor, &export)?;
        }
    }
    Ok(None)
}

fn read_only(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?.to_read_only();
    let export = export(&tensor, &DlpackRequest::new().max_version(1, 0))?;
    ensure(export.flags() & DLPACK_FLAG_BITMASK_READ_ONLY != 0, || {
        format!(
            "a read-only tensor's export has flags {:#x}, without READ_ONLY",
            export.flags()
        )
    })?;
    ensure(export.flags() & DLPACK_FLAG_BITMASK_IS_COPIED == 0, || {
        "a zero-copy export claims IS_COPIED".to_owned()
    })?;
    drop(export);
    for request in [DlpackRequest::new(), DlpackRequest::new().max_version(0, 9)] {
        expect_refusal(&tensor, &request, "a read-only export to a legacy consumer")?;
    }
    ensure(tensor.buffer().live_exports() == 0, || {
        "a refused export left an export registered".to_owned()
    })?;
    Ok(None)
}

fn refuse_copy(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?;
    let reason = expect_refusal(
        &tensor,
        &DlpackRequest::new().max_version(1, 1).copy(true),
        "copy=True",
    )?;
    ensure(
        reason
            == "copy=True is not supported; devmm exports are always zero-copy; call Tensor.to(device) for a copy and export that",
        || format!("copy=True was refused with {reason:?}"),
    )?;
    export(&tensor, &DlpackRequest::new().max_version(1, 1).copy(false))?;
    Ok(None)
}

fn refuse_dl_device(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?;
    let (ty, id) = bench.other_device();
    expect_refusal(
        &tensor,
        &DlpackRequest::new().max_version(1, 1).dl_device(ty, id),
        "an export to another device",
    )?;
    let (own_ty, own_id) = bench.device.dlpack_device();
    expect_refusal(
        &tensor,
        &DlpackRequest::new()
            .max_version(1, 1)
            .dl_device(own_ty, own_id.checked_add(1).unwrap_or(0)),
        "an export to another ordinal",
    )?;
    export(
        &tensor,
        &DlpackRequest::new()
            .max_version(1, 1)
            .dl_device(own_ty, own_id),
    )?;
    Ok(None)
}

fn refuse_freed(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?;
    tensor
        .buffer()
        .free(&bench.stream)
        .map_err(|e| format!("free failed: {e}"))?;
    for request in [DlpackRequest::new(), DlpackRequest::new().max_version(1, 1)] {
        expect_refusal(&tensor, &request, "an export of a freed buffer")?;
    }
    Ok(None)
}

/// The export honours the runtime's `stream=` mapping: values the platform
/// refuses are refused (not silently exported), and "no sync" (-1), "none
/// given", the default stream's value and a stream the runtime created
/// export. Only live streams are named: on a real driver any other handle is
/// a wild pointer.
fn stream_handoff(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?;
    let runtime = bench
        .stream
        .runtime()
        .map_err(|e| format!("the stream has no runtime: {e}"))?;
    let created = runtime
        .create_stream(bench.device)
        .map_err(|e| format!("cannot create a consumer stream: {e}"))?;
    let created_value = i64::try_from(created.handle())
        .map_err(|_| format!("stream handle {:#x} does not fit DLPack", created.handle()))?;
    for value in [Some(-1), None, Some(0), Some(created_value)] {
        let mut request = DlpackRequest::new().max_version(1, 1);
        if let Some(v) = value {
            request = request.stream(v);
        }
        let mapped = runtime.consumer_stream(bench.device, value);
        // The export takes this answer without asking (issue #16).
        if value.is_none()
            && runtime.streamless_device() == Some(bench.device)
            && !matches!(mapped, Ok(None))
        {
            return Err(format!(
                "the {} runtime names {} as streamless, but maps stream=None there to {mapped:?}",
                runtime.name(),
                bench.device
            ));
        }
        let exported = tensor.to_dlpack(&request);
        match (&mapped, &exported) {
            (Err(_), Ok(_)) => {
                return Err(format!(
                    "stream={value:?} is refused by the {} runtime but was exported",
                    runtime.name()
                ));
            }
            (Ok(_), Err(e)) => {
                return Err(format!(
                    "stream={value:?} maps to a stream but the export failed: {e}"
                ));
            }
            _ => {}
        }
    }
    Ok(None)
}

fn deleter_lifetime(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?;
    let block = (tensor.buffer().ptr().addr(), tensor.buffer().nbytes());
    let first = export(&tensor, &DlpackRequest::new().max_version(1, 1))?;
    let second = export(&tensor, &DlpackRequest::new())?;
    ensure(tensor.buffer().live_exports() == 2, || {
        format!(
            "two exports are live but the buffer counts {}",
            tensor.buffer().live_exports()
        )
    })?;
    tensor
        .buffer()
        .free(&bench.stream)
        .map_err(|e| format!("free failed: {e}"))?;
    ensure(bench.resource.log().is_empty(), || {
        "free() released memory that two exports still hold".to_owned()
    })?;
    drop(first);
    ensure(bench.resource.log().is_empty(), || {
        "the first deleter released memory the second export still holds".to_owned()
    })?;
    // The last deleter runs on another thread, as a consumer's may.
    std::thread::spawn(move || drop(second))
        .join()
        .map_err(|_| "the deleter panicked on another thread".to_owned())?;
    let released = bench.resource.log();
    ensure(released == [block], || match released.as_slice() {
        [] => "the last deleter did not release the freed buffer".to_owned(),
        _ => format!("the buffer {block:x?} was released as {released:x?}"),
    })?;
    drop(tensor);
    let after_drop = bench.resource.log();
    ensure(after_drop == [block], || {
        format!("dropping the tensor after the release released again: {after_drop:x?}")
    })?;
    Ok(None)
}

fn raw_deleter(bench: &Bench) -> CheckResult {
    let tensor = bench.plain()?;
    let versioned = export(&tensor, &DlpackRequest::new().max_version(1, 1))?
        .into_raw()
        .cast::<DLManagedTensorVersioned>();
    let legacy = export(&tensor, &DlpackRequest::new())?
        .into_raw()
        .cast::<DLManagedTensor>();
    ensure(tensor.buffer().live_exports() == 2, || {
        "exports given away with into_raw are not counted as live".to_owned()
    })?;
    // SAFETY: both pointers came from `into_raw` of exports of their
    // flavour; each deleter is called exactly once, as a consumer would.
    unsafe {
        let deleter = (*versioned)
            .deleter
            .ok_or("a versioned export has no deleter")?;
        deleter(versioned);
        let deleter = (*legacy).deleter.ok_or("a legacy export has no deleter")?;
        deleter(legacy);
    }
    ensure(tensor.buffer().live_exports() == 0, || {
        format!(
            "{} exports remain after both deleters ran",
            tensor.buffer().live_exports()
        )
    })?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::MemoryInfo;
    use crate::runtime::{ActivationGuard, DeviceRuntime};
    use crate::stream::{StreamOps, StreamRuntime, StreamSentinel};
    use crate::testing::RecordingMemoryResource;

    /// The CPU runtime, except that it maps `stream=None` to its stream
    /// while claiming the CPU never gets one: the lie `stream_handoff`
    /// must catch, since an export believes the claim without asking.
    #[derive(Debug)]
    struct ClaimsStreamless(Arc<dyn DeviceRuntime>);

    impl ClaimsStreamless {
        fn new() -> Arc<ClaimsStreamless> {
            let cpu = crate::runtime::runtime_for(Device::CPU).expect("the cpu runtime");
            Arc::new(ClaimsStreamless(cpu))
        }

        /// A stream of this runtime: its ops answer with the runtime itself.
        fn stream(self: &Arc<Self>) -> Stream {
            Stream::borrowed(Device::CPU, 0, Arc::clone(self) as Arc<dyn StreamOps>)
        }
    }

    impl StreamOps for ClaimsStreamless {
        fn synchronize(&self, _: Device, _: usize) -> Result<()> {
            Ok(())
        }

        fn wait(&self, _: Device, _: usize, _: usize) -> Result<()> {
            Ok(())
        }

        fn destroy(&self, _: Device, _: usize) {}

        fn runtime(self: Arc<Self>) -> Result<Arc<dyn StreamRuntime>> {
            Ok(self)
        }
    }

    impl StreamRuntime for ClaimsStreamless {
        fn name(&self) -> &str {
            "claims-streamless"
        }

        fn device_types(&self) -> &[DeviceType] {
            &[DeviceType::Cpu]
        }

        fn stream(&self, device: Device, which: StreamSentinel) -> Result<Stream> {
            self.0.stream(device, which)
        }

        fn create_stream(&self, device: Device) -> Result<Stream> {
            self.0.create_stream(device)
        }

        fn wrap_stream(&self, device: Device, handle: usize) -> Result<Stream> {
            self.0.wrap_stream(device, handle)
        }

        fn consumer_stream(&self, device: Device, value: Option<i64>) -> Result<Option<Stream>> {
            match value {
                None => Ok(Some(Stream::cpu())),
                Some(_) => self.0.consumer_stream(device, value),
            }
        }

        fn streamless_device(&self) -> Option<Device> {
            Some(Device::CPU)
        }

        unsafe fn copy_host_to_device(&self, _: DevicePtr, _: &[u8], _: &Stream) -> Result<()> {
            unreachable!("the DLPack suite never touches memory")
        }

        unsafe fn copy_device_to_host(&self, _: &mut [u8], _: DevicePtr, _: &Stream) -> Result<()> {
            unreachable!("the DLPack suite never touches memory")
        }

        unsafe fn copy_device_to_device(
            &self,
            _: DevicePtr,
            _: DevicePtr,
            _: usize,
            _: &Stream,
        ) -> Result<()> {
            unreachable!("the DLPack suite never touches memory")
        }
    }

    impl DeviceRuntime for ClaimsStreamless {
        fn device_count(&self) -> Result<usize> {
            Ok(1)
        }

        fn memory_info(&self, device: Device) -> Result<MemoryInfo> {
            self.0.memory_info(device)
        }

        fn activate(&self, device: Device) -> Result<ActivationGuard> {
            self.0.activate(device)
        }

        fn default_resource(&self, device: Device) -> Result<Arc<dyn MemoryResource>> {
            self.0.default_resource(device)
        }
    }

    fn bench(stream: Stream) -> Bench {
        let recording = Arc::new(RecordingMemoryResource::on_device(Device::CPU));
        Bench {
            device: Device::CPU,
            resource: Arc::new(Released::new(recording)),
            stream,
        }
    }

    #[test]
    fn a_second_release_is_logged_and_refused_before_the_resource() -> Result<()> {
        let recording = Arc::new(RecordingMemoryResource::on_device(Device::CPU));
        let released = Released::new(recording.clone());
        let s = Stream::cpu();
        let ptr = released.allocate(64, &s)?;
        // SAFETY: the recording resource's pointers are never dereferenced.
        unsafe { released.deallocate(ptr, 64, &s)? };
        // SAFETY: as above; the ledger refuses the second release.
        let again = unsafe { released.deallocate(ptr, 64, &s) };
        assert!(matches!(again, Err(Error::Misuse { .. })), "{again:?}");
        assert_eq!(released.log(), [(ptr.addr(), 64), (ptr.addr(), 64)]);
        let frees = recording
            .calls()
            .iter()
            .filter(|c| matches!(c, crate::testing::RecordedCall::Deallocate { .. }))
            .count();
        assert_eq!(frees, 1, "the refused release reached the resource");
        assert_eq!(format!("{released:?}"), format!("{recording:?}"));
        Ok(())
    }

    #[test]
    fn stream_handoff_catches_a_false_streamless_claim() {
        let failure = stream_handoff(&bench(ClaimsStreamless::new().stream()))
            .expect_err("the false claim passed");
        let claim = "the claims-streamless runtime names cpu:0 as streamless, but maps \
                     stream=None there to Ok(Some(Stream {";
        assert!(failure.starts_with(claim), "{failure}");
    }

    #[test]
    fn stream_handoff_passes_the_cpu_runtime() {
        let cpu = Bench::new(Device::CPU).expect("the cpu bench");
        assert_eq!(stream_handoff(&cpu), Ok(None));
    }
}
