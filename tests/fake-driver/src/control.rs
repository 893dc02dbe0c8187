//! The `fake_*` control API, exported as C symbols by every fake library.
//!
//! Tests reach it with `dlsym` on the same library the code under test loaded (`dlopen` of one
//! path returns one instance, so both see the same state). The state is per library and
//! process-wide: tests sharing a process must serialise their use of a fake.
//!
//! Functions returning `c_int` answer 0 on success and -1 on a bad argument.
//!
//! ```
//! use fake_driver::control::*;
//! fake_reset();
//! assert_eq!(fake_set_memory_limit(0, 4096), 0);
//! assert_eq!(fake_set_memory_limit(9, 4096), -1);
//! assert_eq!(fake_live_allocations(), 0);
//! // SAFETY: the name is a NUL-terminated string.
//! assert_eq!(unsafe { fake_call_count(c"cudaMalloc".as_ptr()) }, 0);
//! ```

use std::ffi::{c_char, c_int, CStr};

use crate::call::guarded;
use crate::state::{self, State};

/// Failure of a control call: a bad argument.
const REFUSED: c_int = -1;

fn status(ok: bool) -> c_int {
    if ok {
        0
    } else {
        REFUSED
    }
}

/// # Safety
/// `ptr` is null or a NUL-terminated string.
unsafe fn text<'a>(ptr: *const c_char) -> Option<&'a str> {
    // SAFETY: non-null, and NUL-terminated by this function's contract.
    (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_str().ok())?
}

/// Back to a fresh library: held work released and no thread holding (`fake_hold_work`),
/// every live allocation freed (like a device reset), every stream and event destroyed, log, counters and pending failures cleared, 2 devices with the default
/// 1 GiB limit, every thread's current device 0, default versions. Handles are never reused, so
/// a handle from before the reset stays invalid.
/// Work still queued on streams runs to the end first.
#[no_mangle]
pub extern "C" fn fake_reset() {
    guarded(|| {
        crate::queue::release_all();
        crate::call::clear_delays();
        let pending = crate::stream::all_work(&state::lock());
        pending.iter().for_each(crate::queue::Marker::wait);
        let mut state = state::lock();
        state.memory.clear();
        *state = State::default();
    })
}

/// Sets the number of devices (0 to 64). With 0, `*GetDeviceCount` fails with no-device.
/// Allocations on devices removed this way can still be freed.
#[no_mangle]
pub extern "C" fn fake_set_device_count(count: c_int) -> c_int {
    guarded(|| {
        let count = usize::try_from(count);
        status(count.is_ok_and(|count| state::lock().devices.set_count(count).is_ok()))
    })
}

/// Sets `device`'s memory limit: allocations past it fail with out-of-memory and
/// `*MemGetInfo` reports it as the total. Usage counts requested bytes exactly.
#[no_mangle]
pub extern "C" fn fake_set_memory_limit(device: c_int, bytes: u64) -> c_int {
    guarded(|| status(state::lock().devices.set_limit(device, bytes).is_ok()))
}

/// Sets what `*RuntimeGetVersion` and `*DriverGetVersion` report.
#[no_mangle]
pub extern "C" fn fake_set_version(runtime: c_int, driver: c_int) {
    guarded(|| state::lock().versions = Some((runtime, driver)))
}

/// The next call of the function `name` (e.g. `"cudaMalloc"`) returns `status` and does
/// nothing else (it is still counted and logged). Arming it twice fails the next two calls.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn fake_fail_next(name: *const c_char, status: c_int) -> c_int {
    // SAFETY: this function's contract.
    unsafe { fake_fail_nth(name, 1, status) }
}

/// The `nth` (1-based) next call of `name` returns `status`; `nth` 0 is refused.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn fake_fail_nth(name: *const c_char, nth: u64, status: c_int) -> c_int {
    guarded(|| {
        // SAFETY: this function's contract.
        let Some(name) = (unsafe { text(name) }).filter(|_| nth > 0) else {
            return REFUSED;
        };
        state::lock().injections.arm(name.to_owned(), nth, status);
        0
    })
}

/// How many times `name` was called since the last reset or clear (failed calls included).
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn fake_call_count(name: *const c_char) -> u64 {
    guarded(|| {
        // SAFETY: this function's contract.
        unsafe { text(name) }.map_or(0, |name| state::lock().log.calls(name))
    })
}

/// Copies the call log (one call per line, each ending in `\n`; format in
/// [`entry`](crate::entry)) into `buf` like `snprintf`: at most `cap - 1` bytes and a NUL.
/// Returns the full length without the NUL, so a return `>= cap` means it was cut short; a null
/// `buf` or zero `cap` just measures.
///
/// # Safety
/// `buf` is null or valid for writes of `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn fake_call_log(buf: *mut c_char, cap: usize) -> usize {
    guarded(|| {
        let log = state::lock().log.text();
        if !buf.is_null() && cap > 0 {
            let copied = log.len().min(cap - 1);
            // SAFETY: `buf` holds `cap > copied` bytes by this function's contract, and
            // cannot overlap the freshly built `log`.
            unsafe {
                std::ptr::copy_nonoverlapping(log.as_ptr().cast::<c_char>(), buf, copied);
                buf.add(copied).write(0);
            }
        }
        log.len()
    })
}

/// Forgets the calls so far (log and counters); memory, handles and devices are kept.
#[no_mangle]
pub extern "C" fn fake_clear_calls() {
    guarded(|| state::lock().log.clear())
}

/// Live allocations of every kind (device, managed, pinned host).
#[no_mangle]
pub extern "C" fn fake_live_allocations() -> u64 {
    guarded(|| state::lock().memory.live_count() as u64)
}

/// Strict mode (`on` non-zero, the default): a dead stream or event handle aborts the process.
/// Off, it is an invalid-handle error. `fake_reset` goes back to the default (strict unless
/// `FAKE_DRIVER_LENIENT=1`), as it does for the other modes.
#[no_mangle]
pub extern "C" fn fake_set_strict(on: c_int) {
    guarded(|| state::lock().mode.strict = on != 0)
}

/// A library without a driver (`on` non-zero): every status call fails with insufficient-driver.
#[no_mangle]
pub extern "C" fn fake_set_no_driver(on: c_int) {
    guarded(|| state::lock().mode.no_driver = on != 0)
}

/// Whether `device` supports memory pools (`cudaDevAttrMemoryPoolsSupported`); without them
/// `*MallocAsync` fails with not-supported.
#[no_mangle]
pub extern "C" fn fake_set_pools(device: c_int, supported: c_int) -> c_int {
    guarded(|| {
        status(
            state::lock()
                .devices
                .set_pools_supported(device, supported != 0)
                .is_ok(),
        )
    })
}

/// The host NUMA node closest to `device` (`cudaDevAttrHostNumaId`, 0 by default): 0 or 1 on
/// the fake's two-socket machine, -1 for a system without NUMA.
#[no_mangle]
pub extern "C" fn fake_set_host_numa_id(device: c_int, node: c_int) -> c_int {
    guarded(|| status(state::lock().devices.set_host_numa_id(device, node).is_ok()))
}

/// Whether the host may touch managed memory while work runs on `device`
/// (`cudaDevAttrConcurrentManagedAccess`, on by default). Off, as on devices whose GPU has all
/// managed memory to itself while any kernel runs, the host must wait for the whole device.
#[no_mangle]
pub extern "C" fn fake_set_concurrent_managed_access(device: c_int, on: c_int) -> c_int {
    guarded(|| {
        status(
            state::lock()
                .devices
                .set_concurrent_managed_access(device, on != 0)
                .is_ok(),
        )
    })
}

/// Whether `device` has unified addressing (`cudaDevAttrUnifiedAddressing`, on by default);
/// without it, a copy of the default kind (`cudaMemcpyDefault`) is an invalid direction.
#[no_mangle]
pub extern "C" fn fake_set_unified_addressing(device: c_int, on: c_int) -> c_int {
    guarded(|| {
        status(
            state::lock()
                .devices
                .set_unified_addressing(device, on != 0)
                .is_ok(),
        )
    })
}

/// Makes the next call of the function `name` (from any thread) sleep `micros` before it runs,
/// without holding the fake's state, so other calls go on meanwhile: a test holds one thread
/// inside a driver call, as a slow driver would. -1 for a NULL or non-UTF-8 name.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn fake_delay_next_call(name: *const c_char, micros: u64) -> c_int {
    guarded(|| {
        // SAFETY: this function's contract.
        let name = unsafe { text(name) };
        name.map(|name| crate::call::delay_next(name.to_owned(), micros))
            .map_or(REFUSED, |()| 0)
    })
}

/// How many calls are sleeping in a delay `fake_delay_next_call` armed, now.
#[no_mangle]
pub extern "C" fn fake_delayed_calls_sleeping() -> u64 {
    guarded(crate::call::sleeping)
}

/// Microseconds each item of stream work waits before it runs (0 by default).
#[no_mangle]
pub extern "C" fn fake_set_stream_delay(micros: u64) {
    guarded(|| crate::queue::set_delay(micros))
}

/// Holds (`on` nonzero) or stops holding the work the calling thread queues: each job it
/// queues while holding waits, before it runs, for the next `fake_release_work` (or
/// `fake_reset`), and the work queued behind it on its stream waits with it. A test checks
/// "not run yet" while the work is held, with no timing involved. Synchronizing on a stream
/// with held work blocks until another thread releases it.
#[no_mangle]
pub extern "C" fn fake_hold_work(on: c_int) {
    guarded(|| crate::queue::set_holding(on != 0))
}

/// Lets all work held so far (`fake_hold_work`) run.
#[no_mangle]
pub extern "C" fn fake_release_work() {
    guarded(crate::queue::release)
}

/// How many devices have a context (created by `*SetDevice` or a call that needs one).
#[no_mangle]
pub extern "C" fn fake_context_count() -> u64 {
    guarded(|| state::lock().devices.contexts() as u64)
}

/// 1 if `device` has a context, 0 if not, -1 for a device that does not exist.
#[no_mangle]
pub extern "C" fn fake_has_context(device: c_int) -> c_int {
    guarded(|| match state::lock().devices.has_context(device) {
        Ok(has) => c_int::from(has),
        Err(_) => REFUSED,
    })
}

/// The calling thread's last error, without clearing it (what `*PeekAtLastError` answers).
#[no_mangle]
pub extern "C" fn fake_last_error() -> c_int {
    guarded(|| {
        let state = state::lock();
        let thread = std::thread::current().id();
        state.last_error.get(&thread).copied().unwrap_or(0)
    })
}

/// Pools made with `*MemPoolCreate` and not yet gone: a pool destroyed while blocks from it
/// are live counts until its last block is freed.
#[no_mangle]
pub extern "C" fn fake_live_pools() -> u64 {
    guarded(|| state::lock().pools.count() as u64)
}
