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
//! freed theirs. The real drivers do not check (the pool may hand the
//! block out again under the importers), so the exporter keeps its buffer
//! until they are done; the fake driver does check, so tests see a breach:
//! the exporter's free fails and its buffer stays open.

use std::sync::Arc;

use crate::buffer::DeviceBuffer;
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::runtime::cuda::CudaRuntime;
use crate::runtime::rocm::RocmRuntime;
use crate::stream::Stream;

pub use crate::ipc_data::{
    EXPORT_DATA_BYTES, IpcDescriptor, IpcMemHandle, MEM_HANDLE_BYTES, PciBusId,
};

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
        // "The imported memory must not be accessed before the allocation
        // operation completes in the exporting process"
        // (`cudaMemPoolImportPointer`): the allocation, and the writes
        // queued after it on the buffer's stream, are done before another
        // process can map the block.
        self.stream().synchronize()?;
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
    /// `CudaRuntimeMemoryResource::synchronous`);
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
        // The writes queued on the buffer's stream are done before another
        // process can open the memory, as for `ipc_descriptor`.
        self.stream().synchronize()?;
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
    /// buffer ordered on `stream` (a stream of the handle's
    /// [`device_here`](IpcMemHandle::device_here)). Its
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
        match Importer::of_handle(handle)? {
            Importer::Cuda(rt) => rt.open_ipc_handle(handle, stream),
            Importer::Rocm(rt) => rt.open_ipc_handle(handle, stream),
        }
    }

    /// Maps the memory `descriptor` names, exported by another process,
    /// as a buffer ordered on `stream` (a stream of the descriptor's
    /// [`device_here`](IpcDescriptor::device_here), the exporter's GPU as
    /// this process numbers it). Its free releases only this process's
    /// mapping, never the
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
        match Importer::of_descriptor(descriptor)? {
            Importer::Cuda(rt) => rt.import_ipc(descriptor, stream),
            Importer::Rocm(rt) => rt.import_ipc(descriptor, stream),
        }
    }
}

impl IpcDescriptor {
    /// The device the memory is on as this process numbers it: the GPU at
    /// the exporter's [`pci_bus_id`](Self::pci_bus_id), which another
    /// process may number differently (`CUDA_VISIBLE_DEVICES`), else
    /// [`device`](Self::device). The stream an import is ordered on is one
    /// of this device. A GPU this process does not see is an
    /// [`Error::InvalidArgument`] that says so, as are the descriptors
    /// [`DeviceBuffer::from_ipc_descriptor`] refuses.
    ///
    /// ```
    /// use devmm::ipc::IpcDescriptor;
    /// use devmm::Device;
    /// let fd = std::fs::File::open("/dev/null")?.into();
    /// let descriptor = IpcDescriptor::from_parts(Device::CPU, 256, fd, [0; 64], 1);
    /// assert!(matches!(descriptor.device_here(), Err(devmm::Error::InvalidArgument { .. })));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn device_here(&self) -> Result<Device> {
        Importer::of_descriptor(self)?.device_here(self.device(), self.pci_bus_id())
    }
}

impl IpcMemHandle {
    /// The device the memory is on as this process numbers it, as for
    /// [`IpcDescriptor::device_here`].
    ///
    /// ```
    /// use devmm::ipc::IpcMemHandle;
    /// use devmm::Device;
    /// let handle = IpcMemHandle::from_parts(Device::CPU, 256, [0; 64], 1);
    /// assert!(matches!(handle.device_here(), Err(devmm::Error::InvalidArgument { .. })));
    /// ```
    pub fn device_here(&self) -> Result<Device> {
        Importer::of_handle(self)?.device_here(self.device(), self.pci_bus_id())
    }
}

/// The runtime that maps memory another process exported, once the checks
/// every import makes have passed.
enum Importer {
    Cuda(Arc<CudaRuntime>),
    Rocm(Arc<RocmRuntime>),
}

impl Importer {
    fn of_handle(handle: &IpcMemHandle) -> Result<Importer> {
        if handle.exporter_pid() == std::process::id() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "the IPC handle of {} bytes on {} was exported by this process ({}); use \
                     the buffer itself here, and open the handle in another process",
                    handle.nbytes(),
                    handle.device(),
                    handle.exporter_pid()
                ),
            });
        }
        Importer::of(handle.device(), "an IPC handle")
    }

    fn of_descriptor(descriptor: &IpcDescriptor) -> Result<Importer> {
        if let Some(refused) = descriptor.unusable() {
            return Err(refused);
        }
        Importer::of(descriptor.device(), "an IPC descriptor")
    }

    /// This process's device for memory an exporter had on `exported`.
    fn device_here(self, exported: Device, pci_bus_id: Option<PciBusId>) -> Result<Device> {
        match self {
            Importer::Cuda(rt) => rt.device_here(exported, pci_bus_id),
            Importer::Rocm(rt) => rt.device_here(exported, pci_bus_id),
        }
    }

    /// The runtime of `device`'s platform; `what` names the import for the
    /// refusal of a device that is not a GPU.
    fn of(device: Device, what: &str) -> Result<Importer> {
        match device.ty() {
            DeviceType::Cuda => Ok(Importer::Cuda(CudaRuntime::load()?)),
            DeviceType::Rocm => Ok(Importer::Rocm(RocmRuntime::load()?)),
            _ => Err(Error::InvalidArgument {
                reason: format!(
                    "{what} names memory on {device}, which no GPU allocator shares; only cuda \
                     and rocm devices export memory"
                ),
            }),
        }
    }
}
