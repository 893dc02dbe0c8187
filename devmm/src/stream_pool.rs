//! Stream flags and a thread-safe pool of streams, spelled as rmm's
//! `CudaStreamFlags` and `CudaStreamPool`, on every runtime (the CPU's
//! pool holds its one stream as often as asked).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::stream::Stream;

/// How a created stream orders against the legacy default stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum StreamFlags {
    /// Synchronizes with the legacy default stream (`cudaStreamDefault`).
    #[default]
    SyncDefault = 0,
    /// Does not synchronize with the legacy default stream (`cudaStreamNonBlocking`).
    NonBlocking = 1,
}

impl TryFrom<i64> for StreamFlags {
    type Error = Error;

    /// The flags of their code (`cudaStreamDefault` 0, `cudaStreamNonBlocking`
    /// 1); any other value is an [`Error::InvalidArgument`].
    ///
    /// ```
    /// use devmm::StreamFlags;
    /// assert_eq!(StreamFlags::try_from(1)?, StreamFlags::NonBlocking);
    /// assert!(StreamFlags::try_from(2).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn try_from(code: i64) -> Result<StreamFlags> {
        match code {
            0 => Ok(StreamFlags::SyncDefault),
            1 => Ok(StreamFlags::NonBlocking),
            other => Err(Error::InvalidArgument {
                reason: format!(
                    "stream flags must be 0 (synchronize with the default stream) or 1 \
                     (non-blocking), not {other}"
                ),
            }),
        }
    }
}

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
