//! A thread-safe pool of streams, spelled as rmm's `CudaStreamPool`, on
//! every runtime (the CPU's pool holds its one stream as often as asked).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::stream::{Stream, StreamFlags};

/// A fixed set of streams of one device, handed out round-robin or by id.
/// Successive calls may return the same stream; the pool owns its streams
/// and they live as long as any clone handed out.
///
/// ```
/// use devmm::{Device, StreamFlags, StreamPool};
/// let pool = StreamPool::new(Device::CPU, 4, StreamFlags::NonBlocking)?;
/// assert_eq!(pool.pool_size(), 4);
/// assert_eq!(pool.get_stream(Some(3))?.device(), Device::CPU);
/// assert!(pool.get_stream(Some(4)).is_err());
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Debug)]
pub struct StreamPool {
    streams: Vec<Stream>,
    next: AtomicUsize,
}

impl StreamPool {
    /// rmm's default pool size.
    pub const DEFAULT_SIZE: usize = 16;

    /// Creates `size` streams on `device` with `flags`.
    pub fn new(device: Device, size: usize, flags: StreamFlags) -> Result<StreamPool> {
        if size == 0 {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "a stream pool on {device} needs at least one stream; pass size >= 1"
                ),
            });
        }
        let runtime = crate::runtime::runtime_for(device)?;
        let streams = (0..size)
            .map(|_| runtime.create_stream_with_flags(device, flags))
            .collect::<Result<_>>()?;
        Ok(StreamPool {
            streams,
            next: AtomicUsize::new(0),
        })
    }

    /// The number of streams in the pool.
    pub fn pool_size(&self) -> usize {
        self.streams.len()
    }

    /// Stream `id`, or the next one round-robin when `None`.
    pub fn get_stream(&self, id: Option<usize>) -> Result<Stream> {
        let index = match id {
            Some(id) if id >= self.streams.len() => {
                return Err(Error::InvalidArgument {
                    reason: format!(
                        "stream id {id} is out of range for a pool of {} streams; pass 0..{}",
                        self.streams.len(),
                        self.streams.len()
                    ),
                });
            }
            Some(id) => id,
            None => self.next.fetch_add(1, Ordering::Relaxed) % self.streams.len(),
        };
        Ok(self.streams[index].clone())
    }
}
