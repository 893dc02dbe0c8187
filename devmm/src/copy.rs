//! Copies between host memory and raw device addresses, with rmm's rule:
//! a copy on a default stream is synchronized before it returns; on any
//! other stream it is asynchronous, and the caller keeps the host memory
//! alive and unchanged until the stream is synchronized.
//!
//! The raw copy's direction, [`CopyKind`](crate::CopyKind), and its
//! address checks live in `copy_kind`, below the streams.

use crate::error::Result;
use crate::ptr::DevicePtr;
use crate::stream::Stream;

/// Synchronizes `stream` when it is one of its runtime's default streams.
pub(crate) fn finish_on_default(stream: &Stream) -> Result<()> {
    if stream.is_default()? {
        stream.synchronize()?;
    }
    Ok(())
}

/// Copies `src` from the host to `dst` on `stream`'s device.
///
/// ```
/// use devmm::{copy_host_to_ptr, DeviceBuffer, Device, Stream};
/// let buf = DeviceBuffer::on_device(3, Device::CPU)?;
/// // SAFETY: `buf` is 3 bytes of real host memory.
/// unsafe { copy_host_to_ptr(b"abc", buf.ptr(), &Stream::cpu())? };
/// let mut back = [0u8; 3];
/// // SAFETY: as above.
/// unsafe { devmm::copy_ptr_to_host(buf.ptr(), &mut back, &Stream::cpu())? };
/// assert_eq!(&back, b"abc");
/// # Ok::<(), devmm::Error>(())
/// ```
///
/// # Safety
///
/// `dst` is valid for `src.len()` bytes of writes on the stream's device.
pub unsafe fn copy_host_to_ptr(src: &[u8], dst: DevicePtr, stream: &Stream) -> Result<()> {
    if src.is_empty() {
        return Ok(());
    }
    let runtime = stream.runtime()?;
    // SAFETY: the caller vouches for `dst`.
    unsafe { runtime.copy_host_to_device(dst, src, stream) }?;
    finish_on_default(stream)
}

/// Copies `dst.len()` bytes at `src` on `stream`'s device to the host (the
/// runtime waits for the bytes before returning, on every stream).
///
/// # Safety
///
/// `src` is valid for `dst.len()` bytes of reads on the stream's device.
pub unsafe fn copy_ptr_to_host(src: DevicePtr, dst: &mut [u8], stream: &Stream) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let runtime = stream.runtime()?;
    // SAFETY: the caller vouches for `src`.
    unsafe { runtime.copy_device_to_host(dst, src, stream) }?;
    finish_on_default(stream)
}

/// Copies `nbytes` from `src` to `dst`, both on `stream`'s device.
///
/// # Safety
///
/// Both ranges are valid for `nbytes` on the stream's device and do not overlap.
pub unsafe fn copy_device_to_ptr(
    src: DevicePtr,
    dst: DevicePtr,
    nbytes: usize,
    stream: &Stream,
) -> Result<()> {
    if nbytes == 0 {
        return Ok(());
    }
    let runtime = stream.runtime()?;
    // SAFETY: the caller vouches for both ranges.
    unsafe { runtime.copy_device_to_device(dst, src, nbytes, stream) }?;
    finish_on_default(stream)
}
