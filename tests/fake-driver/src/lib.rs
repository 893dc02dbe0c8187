//! The engine behind the fake driver libraries (`libfake_cudart.so`, `libfake_hip.so`).
//!
//! The fakes let devmm's CUDA and ROCm runtimes be tested on machines without a GPU, through the
//! real generated loader: each cdylib exports the platform's C symbols with their real signatures
//! and status codes, and forwards every call to the platform-neutral entry points in [`entry`].
//! Memory is host memory, devices are bookkeeping (count, per-device limits, a per-thread current
//! device, whether a context was created, whether memory pools are supported), and every call is
//! counted and logged so tests can assert what the code under test asked the driver to do, in
//! which order.
//!
//! The fakes are as strict as hardware, so code that only works by luck fails here:
//!
//! - each stream runs its work (copies, stream-ordered frees, event records and waits) on its
//!   own worker thread, in order, after a configurable delay (`fake_set_stream_delay`), and a
//!   test holds the work a thread queues until it releases it (`fake_hold_work`,
//!   `fake_release_work`) to see it not yet run; the per-thread stream is the calling thread's own; the legacy stream synchronises with the
//!   blocking streams; freed memory is poisoned (`0xDB`) when the free is reached;
//! - strict mode (the default) aborts the process on a stream or event handle that was never
//!   created or was destroyed (`fake_set_strict(0)` or `FAKE_DRIVER_LENIENT=1` make it an error);
//! - a failing call sets the calling thread's last error, read by `*GetLastError`;
//! - a library without a driver (`fake_set_no_driver`, `FAKE_DRIVER_NO_DRIVER=1`, or
//!   `FAKE_DRIVER_NO_DRIVER=<file name>` for the copy loaded under that name) fails every
//!   status call with insufficient-driver (35); a device without pools (`fake_set_pools`,
//!   `FAKE_DRIVER_NO_POOLS=1`) fails `*MallocAsync` with not-supported (801);
//! - stream capture (`*StreamBeginCapture`, `*StreamEndCapture`, `*StreamIsCapturing`) follows
//!   the CUDA programming guide's rules: captured work does not run, and the calls a capture
//!   forbids fail and invalidate it;
//! - the runtime belongs to the process that made its first call: in a process forked after
//!   that, every status call fails with the initialisation error (3) and touches nothing;
//! - every call taking a stream or freeing device memory checks it belongs to the current
//!   device; `*SetDevice` and calls that need a context create one (`fake_context_count`);
//! - pools made with `*MemPoolCreate` keep the driver's figures: they reserve in 2 MiB chunks,
//!   never past their maximum size, hand unused memory back down to their release threshold at
//!   every synchronization and to `*MemPoolTrimTo`'s argument, and outlive `*MemPoolDestroy`
//!   until their last block is freed (`fake_live_pools`);
//! - a pool made with the POSIX file descriptor handle type keeps its blocks in a `memfd` that
//!   another process maps after `*MemPoolImportFromShareableHandle` and `*MemPoolImportPointer`,
//!   so both read and write the same bytes (see `entry::ipc`);
//! - each process numbers the machine's GPUs its own way, as `CUDA_VISIBLE_DEVICES` makes it
//!   (`FAKE_DRIVER_VISIBLE_DEVICES=1,0`): a device's PCI bus id and its IPC exports name the
//!   machine's GPU, and an importer maps them on its own ordinal for that GPU, or fails with an
//!   invalid device when it does not see it;
//! - the machine has two host NUMA nodes; each device names the nearest
//!   (`cudaDevAttrHostNumaId`, `fake_set_host_numa_id`), and a host pool takes either node.
//!
//! Every cdylib that links this crate also exports the `fake_*` control API ([`control`]); each
//! library has its own state, so the CUDA and HIP fakes never see each other's calls.
//!
//! ```
//! use fake_driver::entry::device;
//! # use fake_driver::Platform;
//! # static PLATFORM: Platform = Platform::EXAMPLE;
//! let mut count = 0;
//! // SAFETY: `count` is valid for a write.
//! let status = unsafe { device::get_device_count(&PLATFORM, "cudaGetDeviceCount", &mut count) };
//! assert_eq!((status, count), (0, 2));
//! ```

mod call;
mod capture;
pub mod control;
mod device;
pub mod entry;
mod event;
mod handle;
mod inject;
mod ipc;
mod log;
mod memory;
mod out;
mod platform;
mod pool;
mod queue;
mod state;
mod stream;

pub use capture::CaptureFault;
pub use platform::{Attributes, Codes, ErrorInfo, Fault, Platform};
