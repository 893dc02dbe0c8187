//! What names memory shared with another process: an [`IpcDescriptor`]
//! (a pool's file descriptor and the driver's export data) and an
//! [`IpcMemHandle`] (the legacy `cudaIpcGetMemHandle` bytes). Plain data,
//! below the resources that make them; [`ipc`](crate::ipc) opens them.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::device::Device;
use crate::error::Error;

/// A GPU as the machine names it, the same in every process: its PCI bus
/// id (`cudaDeviceGetPCIBusId`, `"0000:3b:00.0"`), kept in lower case.
/// Ordinals are a process's own numbering (`CUDA_VISIBLE_DEVICES`,
/// `HIP_VISIBLE_DEVICES`), so an importer finds the exporter's GPU by this.
///
/// ```
/// use devmm::ipc::PciBusId;
/// let bus = PciBusId::new("0000:3B:00.0").unwrap();
/// assert_eq!(bus.as_str(), "0000:3b:00.0");
/// assert!(PciBusId::new("not a bus id, far too long to be one").is_none());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciBusId {
    len: u8,
    text: [u8; PciBusId::MAX_LEN],
}

impl PciBusId {
    /// The longest id kept: an eight-digit domain (`"00000000:3b:00.0"`) and room to spare.
    pub const MAX_LEN: usize = 24;

    /// The id `text` names, in lower case; `None` for an empty or non-ASCII
    /// text, or one longer than [`MAX_LEN`](Self::MAX_LEN).
    pub fn new(text: &str) -> Option<PciBusId> {
        let bytes = text.as_bytes();
        if bytes.is_empty() || bytes.len() > Self::MAX_LEN || !text.is_ascii() {
            return None;
        }
        let mut id = PciBusId {
            len: bytes.len() as u8, // at most MAX_LEN, checked above
            text: [0; Self::MAX_LEN],
        };
        id.text[..bytes.len()].copy_from_slice(&text.to_ascii_lowercase().into_bytes());
        Some(id)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII was stored (`new`).
        std::str::from_utf8(&self.text[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Display for PciBusId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for PciBusId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PciBusId({:?})", self.as_str())
    }
}

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
    pci_bus_id: Option<PciBusId>,
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
            pci_bus_id: None,
        }
    }

    /// The descriptor naming the exporter's GPU by its PCI bus id as well,
    /// which an importer that numbers its GPUs another way finds it by.
    #[must_use]
    pub fn with_pci_bus_id(mut self, pci_bus_id: PciBusId) -> IpcDescriptor {
        self.pci_bus_id = Some(pci_bus_id);
        self
    }

    /// The device the memory is on, as the exporting process numbers it.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The exporter's GPU as the machine names it; `None` for a descriptor
    /// made without it, whose device ordinal is taken as this process's.
    pub fn pci_bus_id(&self) -> Option<PciBusId> {
        self.pci_bus_id
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

    /// The same descriptor over a duplicate of its file descriptor (a
    /// closed one copies as closed): an importer can map from the copy
    /// while the original stays free for other threads to read or close.
    ///
    /// ```
    /// use devmm::ipc::IpcDescriptor;
    /// use devmm::Device;
    /// let fd = std::fs::File::open("/dev/null")?.into();
    /// let mut descriptor = IpcDescriptor::from_parts(Device::new(devmm::DeviceType::Cuda, 0), 256, fd, [0; 64], 1);
    /// let copy = descriptor.try_clone()?;
    /// descriptor.close();
    /// assert!(!copy.is_closed() && copy.nbytes() == 256);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_clone(&self) -> std::io::Result<IpcDescriptor> {
        Ok(IpcDescriptor {
            handle: self
                .handle()
                .map(|fd| fd.try_clone_to_owned())
                .transpose()?,
            ..*self
        })
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
    pci_bus_id: Option<PciBusId>,
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
            pci_bus_id: None,
        }
    }

    /// The handle naming the exporter's GPU by its PCI bus id as well,
    /// which an importer that numbers its GPUs another way finds it by.
    #[must_use]
    pub fn with_pci_bus_id(mut self, pci_bus_id: PciBusId) -> IpcMemHandle {
        self.pci_bus_id = Some(pci_bus_id);
        self
    }

    /// The device the memory is on, as the exporting process numbers it.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The exporter's GPU as the machine names it; `None` for a handle
    /// made without it, whose device ordinal is taken as this process's.
    pub fn pci_bus_id(&self) -> Option<PciBusId> {
        self.pci_bus_id
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
    pci_bus_id: PciBusId,
    nbytes: usize,
    handle: [u8; MEM_HANDLE_BYTES],
) -> IpcMemHandle {
    IpcMemHandle::from_parts(device, nbytes, handle, std::process::id()).with_pci_bus_id(pci_bus_id)
}

/// Made by a resource's [`ipc_export`](crate::MemoryResource::ipc_export).
pub(crate) fn descriptor(
    device: Device,
    pci_bus_id: PciBusId,
    nbytes: usize,
    handle: OwnedFd,
    data: [u8; EXPORT_DATA_BYTES],
) -> IpcDescriptor {
    IpcDescriptor::from_parts(device, nbytes, handle, data, std::process::id())
        .with_pci_bus_id(pci_bus_id)
}
