//! Sharing a buffer with another process: an [`IpcDescriptor`] names a
//! buffer of a pool made with [`enable_ipc`](crate::mrs::cuda::PoolOptions::enable_ipc)
//! (its pool's POSIX file descriptor and the driver's 64 bytes naming the
//! block: `cudaMemPoolExportToShareableHandle`, `cudaMemPoolExportPointer`,
//! or HIP's), and [`DeviceBuffer::from_ipc_descriptor`] maps the same memory
//! in another process.
//!
//! Memory from the driver's synchronous allocator (`cudaMalloc`:
//! `CudaRuntimeMemoryResource` without stream-ordered allocation) shares
//! through the legacy path instead: [`DeviceBuffer::ipc_handle`] gives an
//! [`IpcMemHandle`] (`cudaIpcGetMemHandle`'s 64 bytes, plain data with no
//! file descriptor), and [`DeviceBuffer::from_ipc_handle`] opens it in
//! another process (`cudaIpcOpenMemHandle`); the opened buffer's free is
//! `cudaIpcCloseMemHandle`, which leaves the exporter's memory alone.
//!
//! The driver's rule, which the importer keeps by construction: "the
//! imported memory must be freed from all importing processes before being
//! freed in the exporting process". An imported buffer's free releases only
//! its mapping (`*Free` of the imported pointer, which returns when it is
//! done); the exporter must not free its buffer before every importer has
//! freed theirs, and a driver that can tell refuses (the fake driver does:
//! the exporter's free fails and its buffer stays open).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::buffer::DeviceBuffer;
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::stream::Stream;

/// `cudaMemPoolPtrExportData` / `hipMemPoolPtrExportData`: 64 opaque bytes.
pub const EXPORT_DATA_BYTES: usize = 64;

/// What another process needs to map a buffer: its device, size, the
/// exporting pool's file descriptor and the driver's export data.
///
/// The descriptor owns its file descriptor; [`close`](Self::close) (or
/// dropping it) closes it, after which it imports nothing. Sending one to
/// another process means sending the file descriptor as the platform
/// requires (`SCM_RIGHTS` over a Unix socket, which Python's
/// `multiprocessing` does for devmm's descriptors).
///
/// ```
/// use devmm::ipc::IpcDescriptor;
/// use devmm::Device;
/// let fd = std::fs::File::open("/dev/null")?.into();
/// let mut descriptor = IpcDescriptor::from_parts(Device::new(devmm::DeviceType::Cuda, 0), 256, fd, [0; 64], 1);
/// assert_eq!(descriptor.nbytes(), 256);
/// descriptor.close();
/// assert!(descriptor.is_closed());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct IpcDescriptor {
    device: Device,
    nbytes: usize,
    handle: Option<OwnedFd>,
    data: [u8; EXPORT_DATA_BYTES],
    pid: u32,
}

impl IpcDescriptor {
    /// A descriptor from its parts, as received from another process:
    /// `pid` is the exporting process's id.
    pub fn from_parts(
        device: Device,
        nbytes: usize,
        handle: OwnedFd,
        data: [u8; EXPORT_DATA_BYTES],
        pid: u32,
    ) -> IpcDescriptor {
        IpcDescriptor {
            device,
            nbytes,
            handle: Some(handle),
            data,
            pid,
        }
    }

    /// The device the memory is on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The buffer's size in bytes.
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The exporting pool's file descriptor; `None` once closed.
    pub fn handle(&self) -> Option<BorrowedFd<'_>> {
        self.handle.as_ref().map(AsFd::as_fd)
    }

    /// The driver's 64 bytes naming the block in its pool.
    pub fn export_data(&self) -> &[u8; EXPORT_DATA_BYTES] {
        &self.data
    }

    /// The id of the process that exported the buffer.
    pub fn exporter_pid(&self) -> u32 {
        self.pid
    }

    /// Closes the file descriptor; the descriptor imports nothing after.
    pub fn close(&mut self) {
        self.handle = None;
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.handle.is_none()
    }

    /// The refusal of a descriptor that cannot be imported here and now, or
    /// `None`: a closed one, or one used in the process that exported it.
    fn unusable(&self) -> Option<Error> {
        let reason = if self.handle.is_none() {
            format!(
                "the IPC descriptor of {} bytes on {} is closed; export the buffer again \
                 (buffer.ipc_descriptor()) and send the new descriptor",
                self.nbytes, self.device
            )
        } else if self.pid == std::process::id() {
            format!(
                "the IPC descriptor of {} bytes on {} was exported by this process ({}); \
                 use the buffer itself here, and import the descriptor in another process",
                self.nbytes, self.device, self.pid
            )
        } else {
            return None;
        };
        Some(Error::InvalidArgument { reason })
    }
}

/// `cudaIpcMemHandle_t` / `hipIpcMemHandle_t`: 64 opaque bytes.
pub const MEM_HANDLE_BYTES: usize = 64;

/// The legacy IPC handle of a `cudaMalloc` buffer: its device, size, the
/// driver's 64 bytes (`cudaIpcGetMemHandle`) and the exporting process's
/// id. Plain data: send it to another process any way bytes travel.
///
/// ```
/// use devmm::ipc::IpcMemHandle;
/// use devmm::{Device, DeviceType};
/// let handle = IpcMemHandle::from_parts(Device::new(DeviceType::Cuda, 0), 256, [7; 64], 1);
/// assert_eq!((handle.nbytes(), handle.exporter_pid()), (256, 1));
/// assert_eq!(handle.handle_bytes()[0], 7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcMemHandle {
    device: Device,
    nbytes: usize,
    handle: [u8; MEM_HANDLE_BYTES],
    pid: u32,
}

impl IpcMemHandle {
    /// A handle from its parts, as received from another process: `pid`
    /// is the exporting process's id.
    pub fn from_parts(
        device: Device,
        nbytes: usize,
        handle: [u8; MEM_HANDLE_BYTES],
        pid: u32,
    ) -> IpcMemHandle {
        IpcMemHandle {
            device,
            nbytes,
            handle,
            pid,
        }
    }

    /// The device the memory is on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The buffer's size in bytes.
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The driver's 64 bytes (`cudaIpcMemHandle_t`).
    pub fn handle_bytes(&self) -> &[u8; MEM_HANDLE_BYTES] {
        &self.handle
    }

    /// The id of the process that exported the buffer.
    pub fn exporter_pid(&self) -> u32 {
        self.pid
    }
}

/// Made by a resource's [`ipc_handle`](crate::MemoryResource::ipc_handle).
pub(crate) fn mem_handle(
    device: Device,
    nbytes: usize,
    handle: [u8; MEM_HANDLE_BYTES],
) -> IpcMemHandle {
    IpcMemHandle::from_parts(device, nbytes, handle, std::process::id())
}

/// Made by a resource's [`ipc_export`](crate::MemoryResource::ipc_export).
pub(crate) fn descriptor(
    device: Device,
    nbytes: usize,
    handle: OwnedFd,
    data: [u8; EXPORT_DATA_BYTES],
) -> IpcDescriptor {
    IpcDescriptor::from_parts(device, nbytes, handle, data, std::process::id())
}

impl DeviceBuffer {
    /// A descriptor another process maps this buffer with
    /// ([`from_ipc_descriptor`](Self::from_ipc_descriptor)). The buffer must
    /// come from a pool made with
    /// [`enable_ipc`](crate::mrs::cuda::PoolOptions::enable_ipc); any other
    /// is refused with an [`Error::InvalidArgument`] that says so.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use devmm::{DeviceBuffer, MallocMemoryResource, Stream};
    /// let stream = Stream::cpu();
    /// let buf = DeviceBuffer::new(64, Arc::new(MallocMemoryResource::new()), &stream)?;
    /// let refused = buf.ipc_descriptor().unwrap_err();
    /// assert!(refused.to_string().contains("enable_ipc"));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn ipc_descriptor(&self) -> Result<IpcDescriptor> {
        self.check_open()?;
        match self.resource().ipc_export(self.ptr(), self.nbytes()) {
            Some(exported) => exported,
            None => Err(Error::InvalidArgument {
                reason: format!(
                    "a buffer of {} bytes on {} from {} cannot be shared with another process: \
                     only a pool made for IPC can; allocate it from \
                     CudaAsyncMemoryResource(enable_ipc=True) or \
                     HipAsyncMemoryResource(enable_ipc=True) (in Rust, PoolOptions {{ \
                     enable_ipc: true, .. }}); cudaMalloc memory shares through \
                     buffer.ipc_handle() instead",
                    self.nbytes(),
                    self.device(),
                    crate::resource::resource_chain(&**self.resource()),
                ),
            }),
        }
    }

    /// The legacy IPC handle (`cudaIpcGetMemHandle`) another process opens
    /// this buffer with ([`from_ipc_handle`](Self::from_ipc_handle)). The
    /// buffer must come from the driver's synchronous allocator
    /// (`CudaRuntimeMemoryResource` with `async_alloc=False`, or
    /// [`synchronous`](crate::mrs::cuda::CudaRuntimeMemoryResource::synchronous));
    /// any other is refused with an [`Error::InvalidArgument`] that says
    /// what to use. The exporter must not free the buffer before every
    /// process that opened it has freed its own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use devmm::{DeviceBuffer, MallocMemoryResource, Stream};
    /// let stream = Stream::cpu();
    /// let buf = DeviceBuffer::new(64, Arc::new(MallocMemoryResource::new()), &stream)?;
    /// let refused = buf.ipc_handle().unwrap_err();
    /// assert!(refused.to_string().contains("async_alloc=False"));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn ipc_handle(&self) -> Result<IpcMemHandle> {
        self.check_open()?;
        match self.resource().ipc_handle(self.ptr(), self.nbytes()) {
            Some(handle) => handle,
            None => Err(Error::InvalidArgument {
                reason: format!(
                    "a buffer of {} bytes on {} from {} has no IPC handle: only cudaMalloc \
                     memory has one; allocate it from CudaRuntimeMemoryResource(\
                     async_alloc=False) (in Rust, CudaRuntimeMemoryResource::synchronous), or \
                     share pool memory with buffer.ipc_descriptor() from an IPC pool \
                     (enable_ipc=True)",
                    self.nbytes(),
                    self.device(),
                    crate::resource::resource_chain(&**self.resource()),
                ),
            }),
        }
    }

    /// Opens the memory `handle` names, exported by another process, as a
    /// buffer ordered on `stream` (a stream of the handle's device). Its
    /// free closes only this process's mapping (`cudaIpcCloseMemHandle`).
    ///
    /// A handle used in the process that exported it, or one for a device
    /// that is not a GPU, is an [`Error::InvalidArgument`], as is one the
    /// driver cannot open (a buffer freed, a process gone).
    ///
    /// ```
    /// use devmm::ipc::IpcMemHandle;
    /// use devmm::{Device, DeviceBuffer, DeviceType, Stream};
    /// let handle = IpcMemHandle::from_parts(Device::CPU, 256, [0; 64], 1);
    /// let refused = DeviceBuffer::from_ipc_handle(&handle, &Stream::cpu());
    /// assert!(matches!(refused, Err(devmm::Error::InvalidArgument { .. })));
    /// ```
    pub fn from_ipc_handle(handle: &IpcMemHandle, stream: &Stream) -> Result<DeviceBuffer> {
        if handle.pid == std::process::id() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "the IPC handle of {} bytes on {} was exported by this process ({}); use \
                     the buffer itself here, and open the handle in another process",
                    handle.nbytes, handle.device, handle.pid
                ),
            });
        }
        match handle.device.ty() {
            DeviceType::Cuda => {
                crate::runtime::cuda::CudaRuntime::load()?.open_ipc_handle(handle, stream)
            }
            DeviceType::Rocm => {
                crate::runtime::rocm::RocmRuntime::load()?.open_ipc_handle(handle, stream)
            }
            _ => Err(Error::InvalidArgument {
                reason: format!(
                    "an IPC handle names memory on {}, which no GPU allocator shares; only \
                     cuda and rocm devices export memory",
                    handle.device
                ),
            }),
        }
    }

    /// Maps the memory `descriptor` names, exported by another process,
    /// as a buffer ordered on `stream` (a stream of the descriptor's
    /// device). Its free releases only this process's mapping, never the
    /// exporter's memory; free it before the exporter frees its buffer.
    ///
    /// A closed descriptor, one used in the process that exported it, or
    /// one for a device that is not a GPU is an [`Error::InvalidArgument`];
    /// a descriptor the driver does not recognise is its
    /// [`Error::Driver`].
    ///
    /// ```
    /// use devmm::ipc::IpcDescriptor;
    /// use devmm::{Device, DeviceBuffer, DeviceType, Stream};
    /// let fd = std::fs::File::open("/dev/null")?.into();
    /// let mut descriptor = IpcDescriptor::from_parts(Device::new(DeviceType::Cuda, 0), 256, fd, [0; 64], 1);
    /// descriptor.close();
    /// let refused = DeviceBuffer::from_ipc_descriptor(&descriptor, &Stream::cpu());
    /// assert!(matches!(refused, Err(devmm::Error::InvalidArgument { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_ipc_descriptor(
        descriptor: &IpcDescriptor,
        stream: &Stream,
    ) -> Result<DeviceBuffer> {
        if let Some(refused) = descriptor.unusable() {
            return Err(refused);
        }
        match descriptor.device.ty() {
            DeviceType::Cuda => {
                crate::runtime::cuda::CudaRuntime::load()?.import_ipc(descriptor, stream)
            }
            DeviceType::Rocm => {
                crate::runtime::rocm::RocmRuntime::load()?.import_ipc(descriptor, stream)
            }
            _ => Err(Error::InvalidArgument {
                reason: format!(
                    "an IPC descriptor names memory on {}, which no GPU pool shares; \
                     only cuda and rocm devices export memory",
                    descriptor.device
                ),
            }),
        }
    }
}
