//! What names memory shared with another process: an [`IpcDescriptor`]
//! (a pool's file descriptor and the driver's export data) and an
//! [`IpcMemHandle`] (the legacy `cudaIpcGetMemHandle` bytes). Plain data,
//! below the resources that make them; [`ipc`](crate::ipc) opens them.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::device::Device;
use crate::error::Error;

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
    pub(crate) fn unusable(&self) -> Option<Error> {
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
