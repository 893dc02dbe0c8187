//! `mr_conformance`: the memory-resource contract, checked against fresh resources.

use std::fmt;

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryResource, resource_chain};
use crate::stream::Stream;

use super::report::{CheckResult, ConformanceReport, ensure};

type WriteFn = dyn Fn(DevicePtr, &[u8], &Stream) -> Result<()> + Send + Sync;
type ReadFn = dyn Fn(&mut [u8], DevicePtr, &Stream) -> Result<()> + Send + Sync;
type StreamFactoryFn = dyn Fn(Device) -> Result<Stream> + Send + Sync;
type AlignedFactoryFn = dyn Fn(usize) -> Result<Box<dyn MemoryResource>> + Send + Sync;

/// Sizes the data checks allocate: odd, even, around a cache line, and a
/// few pages' worth.
const SIZES: [usize; 9] = [1, 3, 8, 63, 64, 65, 255, 1000, 4099];

/// The alignments asked of an [aligned factory](MrConformanceOptions::aligned_factory).
const REQUESTED_ALIGNMENTS: [usize; 12] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096];

/// The sizes allocated at each requested alignment.
const REQUESTED_SIZES: [usize; 4] = [1, 17, 255, 4096];

/// How [`mr_conformance`] reaches the memory and its streams.
///
/// By default it copies bytes with the device's runtime (on the CPU: a
/// plain memcpy on the host) and allocates on the device's default stream.
/// A resource whose memory the runtime cannot copy supplies `write`,
/// `read` and `stream_factory`; one whose pointers are not real memory
/// (like [`RecordingMemoryResource`](super::RecordingMemoryResource)) turns
/// data access off.
///
/// ```
/// use devmm::testing::MrConformanceOptions;
/// use devmm::{runtime_for, Device};
/// let options = MrConformanceOptions::new()
///     .stream_factory(|device| runtime_for(device)?.create_stream(device))
///     .write(|dst, src, stream| {
///         let rt = runtime_for(stream.device())?;
///         // SAFETY: mr_conformance passes pointers it allocated with room for `src`.
///         unsafe { rt.copy_host_to_device(dst, src, stream) }
///     });
/// # let _ = options;
/// ```
#[derive(Default)]
pub struct MrConformanceOptions {
    write: Option<Box<WriteFn>>,
    read: Option<Box<ReadFn>>,
    stream_factory: Option<Box<StreamFactoryFn>>,
    aligned_factory: Option<Box<AlignedFactoryFn>>,
    no_data_access: bool,
    only: Option<Vec<String>>,
    required: Vec<String>,
}

impl MrConformanceOptions {
    /// The defaults: the runtime's copies and default stream.
    pub fn new() -> MrConformanceOptions {
        MrConformanceOptions::default()
    }

    /// Writes bytes to device memory: `write(dst, src, stream)`. The suite
    /// only passes pointers it allocated with room for `src`.
    pub fn write(
        mut self,
        write: impl Fn(DevicePtr, &[u8], &Stream) -> Result<()> + Send + Sync + 'static,
    ) -> MrConformanceOptions {
        self.write = Some(Box::new(write));
        self
    }

    /// Reads device memory back, waiting for it: `read(dst, src, stream)`.
    pub fn read(
        mut self,
        read: impl Fn(&mut [u8], DevicePtr, &Stream) -> Result<()> + Send + Sync + 'static,
    ) -> MrConformanceOptions {
        self.read = Some(Box::new(read));
        self
    }

    /// Makes the stream each check allocates on.
    pub fn stream_factory(
        mut self,
        factory: impl Fn(Device) -> Result<Stream> + Send + Sync + 'static,
    ) -> MrConformanceOptions {
        self.stream_factory = Some(Box::new(factory));
        self
    }

    /// Makes a resource that promises a requested alignment, for the
    /// `requested_alignment` check (skipped without one): each power of two
    /// from 1 to 4096 except 2048 is asked for (the seed's sweep), and each
    /// resource's pointers must meet it and hold their whole span.
    pub fn aligned_factory(
        mut self,
        factory: impl Fn(usize) -> Result<Box<dyn MemoryResource>> + Send + Sync + 'static,
    ) -> MrConformanceOptions {
        self.aligned_factory = Some(Box::new(factory));
        self
    }

    /// Never touches the memory: the byte-exact checks are skipped and the
    /// aliasing check compares address ranges only.
    pub fn without_data_access(mut self) -> MrConformanceOptions {
        self.no_data_access = true;
        self
    }

    /// Runs only the named checks (see [`mr_conformance`] for the names),
    /// so each can be reported, or tested, on its own. A name that is no
    /// check is reported as a failed `only` check rather than ignored, so a
    /// misspelt selection cannot pass by running nothing.
    pub fn only<S: Into<String>>(
        mut self,
        checks: impl IntoIterator<Item = S>,
    ) -> MrConformanceOptions {
        self.only = Some(checks.into_iter().map(Into::into).collect());
        self
    }

    /// Makes the named checks required (a name that is no check fails, as
    /// for [`only`](Self::only)): one that would be skipped because
    /// the resource does not support it (it tracks no live allocations,
    /// say) fails instead, saying why. For suites whose contract asks every
    /// resource for them, as the seed's Python one asks `_debug_live_count()`
    /// and misuse detection of every resource.
    ///
    /// ```
    /// use devmm::testing::{mr_conformance, CheckStatus, MrConformanceOptions};
    /// use devmm::MallocMemoryResource;
    /// let options = MrConformanceOptions::new().only(["live_count"]).requiring(["live_count"]);
    /// let report = mr_conformance(|| Ok(MallocMemoryResource::new()), &options);
    /// let CheckStatus::Failed(why) = &report.checks()[0].status else { panic!("{report}") };
    /// assert_eq!(
    ///     why,
    ///     "required, but the resource does not track live allocations \
    ///      (live_count(); Python: _debug_live_count())"
    /// );
    /// ```
    pub fn requiring<S: Into<String>>(
        mut self,
        checks: impl IntoIterator<Item = S>,
    ) -> MrConformanceOptions {
        self.required = checks.into_iter().map(Into::into).collect();
        self
    }

    /// Whether the check `name` is selected.
    fn selects(&self, name: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|n| n == name))
    }

    /// Whether a check may touch `mr`'s memory: `Ok(false)` with data
    /// access off, and an error when the runtime's copies would have to
    /// dereference pointers `mr` does not declare real memory (a fake
    /// address would crash the process, not fail the check).
    fn data_access(&self, mr: &dyn MemoryResource) -> Result<bool, String> {
        if self.no_data_access {
            return Ok(false);
        }
        if (self.write.is_none() || self.read.is_none()) && !mr.dereferenceable() {
            return Err(format!(
                "{} does not declare its pointers dereferenceable, so the runtime's copies \
                 cannot reach them; declare them, pass write and read hooks, or turn data \
                 access off (Python: dereferenceable = True, write=, read=, data_access=False)",
                resource_chain(mr)
            ));
        }
        Ok(true)
    }

    fn stream(&self, device: Device) -> Result<Stream> {
        match &self.stream_factory {
            Some(factory) => factory(device),
            None => crate::runtime::runtime_for(device)?.default_stream(device),
        }
    }

    fn write_bytes(&self, dst: DevicePtr, src: &[u8], stream: &Stream) -> Result<()> {
        match &self.write {
            Some(write) => write(dst, src, stream),
            None => {
                let runtime = crate::runtime::runtime_for(stream.device())?;
                // SAFETY: the suite only writes into allocations it holds
                // that are at least `src.len()` bytes long.
                unsafe { runtime.copy_host_to_device(dst, src, stream) }
            }
        }
    }

    fn read_bytes(&self, dst: &mut [u8], src: DevicePtr, stream: &Stream) -> Result<()> {
        match &self.read {
            Some(read) => read(dst, src, stream),
            None => {
                let runtime = crate::runtime::runtime_for(stream.device())?;
                // SAFETY: the suite only reads from allocations it holds
                // that are at least `dst.len()` bytes long.
                unsafe { runtime.copy_device_to_host(dst, src, stream) }
            }
        }
    }
}

impl fmt::Debug for MrConformanceOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MrConformanceOptions")
            .field("write", &self.write.is_some())
            .field("read", &self.read.is_some())
            .field("stream_factory", &self.stream_factory.is_some())
            .field("aligned_factory", &self.aligned_factory.is_some())
            .field("no_data_access", &self.no_data_access)
            .field("only", &self.only)
            .field("required", &self.required)
            .finish()
    }
}

/// Allocations a check holds, returned to the resource when the check ends
/// however it ends, so a failing check leaks nothing.
struct Held<'a> {
    mr: &'a dyn MemoryResource,
    stream: &'a Stream,
    allocations: Vec<(DevicePtr, usize)>,
}

impl<'a> Held<'a> {
    fn new(mr: &'a dyn MemoryResource, stream: &'a Stream) -> Held<'a> {
        Held {
            mr,
            stream,
            allocations: Vec::new(),
        }
    }

    fn allocate(&mut self, nbytes: usize) -> Result<DevicePtr, String> {
        let ptr = self
            .mr
            .allocate(nbytes, self.stream)
            .map_err(|e| format!("allocate({nbytes}) failed: {e}"))?;
        self.allocations.push((ptr, nbytes));
        Ok(ptr)
    }

    /// Deallocates the allocation at `index`, reporting the resource's answer.
    fn deallocate(&mut self, index: usize) -> Result<(), String> {
        let (ptr, nbytes) = self.allocations.swap_remove(index);
        // SAFETY: `ptr` came from `allocate(nbytes)` on this resource and was
        // removed from the held list, so it is deallocated once.
        unsafe { self.mr.deallocate(ptr, nbytes, self.stream) }
            .map_err(|e| format!("deallocate({ptr}, {nbytes}) failed: {e}"))
    }

    fn release_all(&mut self) -> Result<(), String> {
        while !self.allocations.is_empty() {
            self.deallocate(self.allocations.len() - 1)?;
        }
        Ok(())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for (ptr, nbytes) in self.allocations.drain(..) {
            // SAFETY: as in `deallocate`: each held pointer is returned once.
            let _ = unsafe { self.mr.deallocate(ptr, nbytes, self.stream) };
        }
    }
}

/// A byte pattern distinct per allocation and per offset.
fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ seed.wrapping_mul(131)) as u8)
        .collect()
}

/// Runs the memory-resource contract against fresh resources from `factory`
/// (one per check) and reports every check by name; nothing panics out.
///
/// Checks: `alignment_promise`, `zero_byte`, `write_read_exact`,
/// `no_aliasing`, `alignment_honesty`, `requested_alignment` (skipped
/// without an [aligned factory](MrConformanceOptions::aligned_factory)),
/// `live_count`, `misuse_detection`
/// (skipped unless the resource claims [`detects_misuse`](MemoryResource::detects_misuse)),
/// `failures_are_errors` (an impossible request is an `Err`, not a panic
/// and not a pointer), and `concurrent_use`;
/// [`only`](MrConformanceOptions::only) selects some of them.
///
/// ```
/// use devmm::testing::{mr_conformance, MrConformanceOptions};
/// use devmm::{LimitingAdaptor, MallocMemoryResource};
/// let report = mr_conformance(
///     || Ok(LimitingAdaptor::new(MallocMemoryResource::new(), 1 << 20)),
///     &MrConformanceOptions::new(),
/// );
/// assert!(report.is_ok(), "{report}");
/// ```
pub fn mr_conformance<M, F>(mut factory: F, options: &MrConformanceOptions) -> ConformanceReport
where
    M: MemoryResource,
    F: FnMut() -> Result<M>,
{
    let subject = match factory() {
        Ok(mr) => resource_chain(&mr),
        Err(e) => {
            let mut report = ConformanceReport::new("mr_conformance", "a failing factory".into());
            report.run("factory", || Err(format!("the factory failed: {e}")));
            return report;
        }
    };
    let mut report = ConformanceReport::new("mr_conformance", subject);
    let checks: [(&'static str, CheckFn<M>); 10] = [
        ("alignment_promise", alignment_promise),
        ("zero_byte", zero_byte),
        ("write_read_exact", write_read_exact),
        ("no_aliasing", no_aliasing),
        ("alignment_honesty", alignment_honesty),
        ("requested_alignment", requested_alignment),
        ("live_count", live_count),
        ("misuse_detection", misuse_detection),
        ("failures_are_errors", failures_are_errors),
        ("concurrent_use", concurrent_use),
    ];
    // A misspelt name fails, so a selection cannot pass by running (or
    // requiring) nothing.
    let named = [
        ("only", options.only.as_deref()),
        ("requiring", Some(&options.required[..])),
    ];
    for (option, names) in named {
        let unknown: Vec<&str> = names
            .unwrap_or_default()
            .iter()
            .map(String::as_str)
            .filter(|n| !checks.iter().any(|(name, _)| name == n))
            .collect();
        if !unknown.is_empty() {
            let known: Vec<&str> = checks.iter().map(|(name, _)| *name).collect();
            report.run(option, || {
                Err(format!(
                    "no check is named {}; the checks are {}",
                    unknown.join(", "),
                    known.join(", ")
                ))
            });
        }
    }
    for (name, check) in checks {
        if !options.selects(name) {
            continue;
        }
        report.run(name, || {
            let mr = factory().map_err(|e| format!("the factory failed: {e}"))?;
            let stream = options
                .stream(mr.device())
                .map_err(|e| format!("no stream for {}: {e}", mr.device()))?;
            match check(&mr, &stream, options)? {
                Some(reason) if options.required.iter().any(|n| n == name) => {
                    Err(format!("required, but {reason}"))
                }
                outcome => Ok(outcome),
            }
        });
    }
    report
}

type CheckFn<M> = fn(&M, &Stream, &MrConformanceOptions) -> CheckResult;

fn alignment_promise(
    mr: &impl MemoryResource,
    _: &Stream,
    _: &MrConformanceOptions,
) -> CheckResult {
    let alignment = mr.guaranteed_alignment();
    ensure(alignment.is_power_of_two(), || {
        format!("guaranteed_alignment() is {alignment}, not a power of two")
    })?;
    Ok(None)
}

/// Two zero-byte requests held at once: each answer meets the alignment
/// promise, the two are distinct unless null, and freeing both restores
/// the live count. Null is devmm's own zero-byte answer (ADR 0016, item
/// 5); a resource that hands out a non-null one must not hand out the same
/// one twice, or freeing one block frees the other.
fn zero_byte(mr: &impl MemoryResource, stream: &Stream, _: &MrConformanceOptions) -> CheckResult {
    let before = mr.live_count();
    let mut held = Held::new(mr, stream);
    let pair = [held.allocate(0)?, held.allocate(0)?];
    for ptr in pair {
        ensure(ptr.is_aligned(mr.guaranteed_alignment()), || {
            format!("a zero-byte allocation returned {ptr}, which breaks the alignment promise")
        })?;
    }
    ensure(pair[0] != pair[1] || pair[0] == DevicePtr::NULL, || {
        format!(
            "two zero-byte allocations held at once both returned {}; a non-null answer must \
             be distinct from every live one (or return null for zero bytes)",
            pair[0]
        )
    })?;
    held.release_all()?;
    ensure(mr.live_count() == before, || {
        format!(
            "live_count() is {:?} after two zero-byte allocations were freed, was {before:?}",
            mr.live_count()
        )
    })?;
    Ok(None)
}

fn write_read_exact(
    mr: &impl MemoryResource,
    stream: &Stream,
    options: &MrConformanceOptions,
) -> CheckResult {
    if !options.data_access(mr)? {
        return Ok(Some("data access is off in the options".into()));
    }
    let mut held = Held::new(mr, stream);
    for (seed, nbytes) in SIZES.into_iter().enumerate() {
        let ptr = held.allocate(nbytes)?;
        round_trip(options, ptr, nbytes, seed, stream)?;
        held.release_all()?;
    }
    Ok(None)
}

/// Writes a pattern over the `nbytes` at `ptr` and reads it back; a byte
/// that differs is reported.
fn round_trip(
    options: &MrConformanceOptions,
    ptr: DevicePtr,
    nbytes: usize,
    seed: usize,
    stream: &Stream,
) -> Result<(), String> {
    let written = pattern(seed, nbytes);
    options
        .write_bytes(ptr, &written, stream)
        .map_err(|e| format!("writing {nbytes} bytes at {ptr} failed: {e}"))?;
    let mut read = vec![0u8; nbytes];
    options
        .read_bytes(&mut read, ptr, stream)
        .map_err(|e| format!("reading {nbytes} bytes at {ptr} failed: {e}"))?;
    match written.iter().zip(&read).position(|(w, r)| w != r) {
        Some(at) => Err(format!(
            "an allocation of {nbytes} bytes at {ptr} read back byte {at} as {:#04x}, \
             written as {:#04x}",
            read[at], written[at]
        )),
        None => Ok(()),
    }
}

fn no_aliasing(
    mr: &impl MemoryResource,
    stream: &Stream,
    options: &MrConformanceOptions,
) -> CheckResult {
    let mut held = Held::new(mr, stream);
    for nbytes in SIZES {
        held.allocate(nbytes)?;
    }
    let mut ranges: Vec<(usize, usize)> = held
        .allocations
        .iter()
        .map(|&(p, n)| (p.addr(), p.addr().saturating_add(n)))
        .collect();
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        ensure(pair[0].1 <= pair[1].0, || {
            format!(
                "live allocations overlap: [{:#x}, {:#x}) and [{:#x}, {:#x})",
                pair[0].0, pair[0].1, pair[1].0, pair[1].1
            )
        })?;
    }
    if options.data_access(mr)? {
        // Write every allocation first, then read them all: a write into
        // one that lands in another shows up as a changed byte.
        for (seed, &(ptr, nbytes)) in held.allocations.iter().enumerate() {
            options
                .write_bytes(ptr, &pattern(seed + 100, nbytes), stream)
                .map_err(|e| format!("writing {nbytes} bytes at {ptr} failed: {e}"))?;
        }
        for (seed, &(ptr, nbytes)) in held.allocations.iter().enumerate() {
            let mut read = vec![0u8; nbytes];
            options
                .read_bytes(&mut read, ptr, stream)
                .map_err(|e| format!("reading {nbytes} bytes at {ptr} failed: {e}"))?;
            ensure(read == pattern(seed + 100, nbytes), || {
                format!("the {nbytes} bytes at {ptr} changed while other allocations were written")
            })?;
        }
    }
    held.release_all()?;
    Ok(None)
}

fn alignment_honesty(
    mr: &impl MemoryResource,
    stream: &Stream,
    _: &MrConformanceOptions,
) -> CheckResult {
    let alignment = mr.guaranteed_alignment();
    let mut held = Held::new(mr, stream);
    for nbytes in (1..=129).chain([255, 256, 257, 4095, 4096, 65537]) {
        let ptr = held.allocate(nbytes)?;
        ensure(!ptr.is_null(), || {
            format!("allocate({nbytes}) returned null without an error")
        })?;
        ensure(ptr.is_aligned(alignment), || {
            format!(
                "allocate({nbytes}) returned {ptr}, not aligned to the promised {alignment} bytes"
            )
        })?;
        if held.allocations.len() >= 16 {
            held.release_all()?;
        }
    }
    held.release_all()?;
    Ok(None)
}

fn requested_alignment(
    _: &impl MemoryResource,
    stream: &Stream,
    options: &MrConformanceOptions,
) -> CheckResult {
    let Some(make) = &options.aligned_factory else {
        return Ok(Some("no factory taking an alignment".into()));
    };
    for alignment in REQUESTED_ALIGNMENTS {
        let mr = make(alignment)
            .map_err(|e| format!("the factory failed for alignment {alignment}: {e}"))?;
        let data = options.data_access(&*mr)?;
        let mut held = Held::new(&*mr, stream);
        for (seed, nbytes) in REQUESTED_SIZES.into_iter().enumerate() {
            let ptr = held.allocate(nbytes)?;
            ensure(ptr.is_aligned(alignment), || {
                format!(
                    "alignment {alignment} was requested, but allocate({nbytes}) returned {ptr}"
                )
            })?;
            if data {
                // The whole span: an aligned pointer into too short a block
                // shows up as bytes that do not read back.
                round_trip(options, ptr, nbytes, seed, stream)?;
            }
            held.release_all()?;
        }
    }
    Ok(None)
}

fn live_count(mr: &impl MemoryResource, stream: &Stream, _: &MrConformanceOptions) -> CheckResult {
    let Some(baseline) = mr.live_count() else {
        return Ok(Some(
            "the resource does not track live allocations (live_count(); Python: _debug_live_count())"
                .into(),
        ));
    };
    let mut held = Held::new(mr, stream);
    for (i, nbytes) in SIZES.into_iter().enumerate() {
        held.allocate(nbytes)?;
        ensure(mr.live_count() == Some(baseline + i + 1), || {
            format!(
                "live_count() is {:?} after {} allocations from {baseline}",
                mr.live_count(),
                i + 1
            )
        })?;
    }
    while !held.allocations.is_empty() {
        held.deallocate(0)?;
        let expected = baseline + held.allocations.len();
        ensure(mr.live_count() == Some(expected), || {
            format!(
                "live_count() is {:?} after a deallocation, expected {expected}",
                mr.live_count()
            )
        })?;
    }
    Ok(None)
}

/// `Ok(())` when `result` is the misuse `want`; otherwise what happened,
/// led by the misuse's name in the seed's words (`foreign-free`,
/// `size-mismatch`, `double-free`), so a report says which rule failed.
fn expect_misuse(result: Result<()>, want: MisuseKind, what: &str) -> Result<(), String> {
    let seed_name = want.seed_name().unwrap_or("misuse");
    match result {
        Err(Error::Misuse { kind, .. }) if kind == want => Ok(()),
        Err(Error::Misuse { kind, .. }) => Err(format!(
            "{seed_name}: {what} was reported as {kind}, expected {want}"
        )),
        Err(other) => Err(format!(
            "{seed_name}: {what} returned {other}, not Error::Misuse"
        )),
        Ok(()) => Err(format!(
            "{seed_name}: {what} was accepted; the resource claims detects_misuse()"
        )),
    }
}

fn misuse_detection(
    mr: &impl MemoryResource,
    stream: &Stream,
    _: &MrConformanceOptions,
) -> CheckResult {
    if !mr.detects_misuse() {
        return Ok(Some("the resource does not claim detects_misuse()".into()));
    }
    // Every kind of misuse is tried, so a resource that refuses one but
    // lets another pass is told which (a missed double free among them).
    let mut missed = Vec::new();
    let mut held = Held::new(mr, stream);
    let ptr = held.allocate(64)?;
    let inside = ptr.offset(1).ok_or("the allocation ends past usize::MAX")?;
    // SAFETY: the resource claims `detects_misuse`, so its contract turns
    // these bad arguments into `Error::Misuse` and leaves its state untouched.
    let unknown = unsafe { mr.deallocate(inside, 64, stream) };
    missed.extend(
        expect_misuse(
            unknown,
            MisuseKind::UnknownPointer,
            "deallocating a pointer never allocated",
        )
        .err(),
    );
    held.release_all()
        .map_err(|e| format!("after a rejected call, the real deallocate failed: {e}"))?;
    // SAFETY: as above; `ptr` was just deallocated.
    let double = unsafe { mr.deallocate(ptr, 64, stream) };
    missed.extend(expect_misuse(double, MisuseKind::DoubleFree, "deallocating twice").err());
    let ptr = held.allocate(64)?;
    // SAFETY: as above.
    let wrong = unsafe { mr.deallocate(ptr, 32, stream) };
    if wrong.is_ok() {
        // The resource freed it after all: returning it again on the way
        // out would be a real double free, in the suite meant to catch one.
        held.allocations.clear();
    }
    missed.extend(
        expect_misuse(
            wrong,
            MisuseKind::WrongSize { allocated: 64 },
            "deallocating with the wrong size",
        )
        .err(),
    );
    held.release_all()
        .map_err(|e| format!("after the rejected calls, the real deallocate failed: {e}"))?;
    if missed.is_empty() {
        Ok(None)
    } else {
        Err(missed.join("; "))
    }
}

fn failures_are_errors(
    mr: &impl MemoryResource,
    stream: &Stream,
    _: &MrConformanceOptions,
) -> CheckResult {
    for nbytes in [usize::MAX, usize::MAX / 2 + 1] {
        let mut held = Held::new(mr, stream);
        let ptr = held.allocate(nbytes);
        ensure(ptr.is_err(), || {
            format!("allocate({nbytes}) returned a pointer instead of an out-of-memory error")
        })?;
    }
    Ok(None)
}

fn concurrent_use(
    mr: &impl MemoryResource,
    stream: &Stream,
    _: &MrConformanceOptions,
) -> CheckResult {
    const THREADS: usize = 4;
    const ROUNDS: usize = 25;
    let before = mr.live_count();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                scope.spawn(move || -> Result<(), String> {
                    let mut held = Held::new(mr, stream);
                    for round in 0..ROUNDS {
                        held.allocate(8 + 8 * ((t + round) % 16))?;
                        if round % 3 == 2 {
                            held.release_all()?;
                        }
                    }
                    held.release_all()
                })
            })
            .collect();
        workers
            .into_iter()
            .filter_map(|w| match w.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("a thread panicked".into()),
            })
            .collect()
    });
    ensure(failures.is_empty(), || {
        format!(
            "allocating from {THREADS} threads failed: {}",
            failures.join("; ")
        )
    })?;
    ensure(mr.live_count() == before, || {
        format!(
            "live_count() is {:?} after {THREADS} threads freed everything, was {before:?}",
            mr.live_count()
        )
    })?;
    Ok(None)
}
