//! A resource made of two closures: the escape hatch for allocators devmm
//! does not wrap (and the bridge Python-defined resources go through).

use std::fmt;

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

type AllocateFn = dyn Fn(usize, &Stream) -> Result<DevicePtr> + Send + Sync;
type DeallocateFn = dyn Fn(DevicePtr, usize, &Stream) -> Result<()> + Send + Sync;

/// A resource whose `allocate` and `deallocate` are closures.
///
/// The closures own whatever state they capture. `alignment` is the promise
/// callers rely on; an `allocate` closure that breaks it, or returns null
/// for a non-empty request, is reported as [`Error::Misuse`] instead of
/// handing out the pointer.
///
/// ```
/// use devmm::{CallbackMemoryResource, Device, DevicePtr, MemoryResource, Stream};
/// let mr = CallbackMemoryResource::new(
///     Device::CPU,
///     8,
///     |n, _s| Ok(DevicePtr::from_host_ptr(Box::into_raw(vec![0u64; n.div_ceil(8)].into_boxed_slice()) as *mut u64)),
///     |p, n, _s| {
///         // SAFETY: `p` came from the allocate closure with the same `n`.
///         drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p.as_host_ptr::<u64>(), n.div_ceil(8))) });
///         Ok(())
///     },
/// )?;
/// assert!(CallbackMemoryResource::new(Device::CPU, 3, |_, _| Ok(DevicePtr::NULL), |_, _, _| Ok(())).is_err());
/// let s = Stream::cpu();
/// let p = mr.allocate(24, &s)?;
/// unsafe { mr.deallocate(p, 24, &s)? };
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct CallbackMemoryResource {
    name: String,
    device: Device,
    alignment: usize,
    dereferenceable: bool,
    allocate: Box<AllocateFn>,
    deallocate: Box<DeallocateFn>,
}

impl CallbackMemoryResource {
    /// A resource on `device` promising `alignment`, a power of two (1
    /// promises nothing); anything else is an [`Error::InvalidArgument`].
    pub fn new(
        device: Device,
        alignment: usize,
        allocate: impl Fn(usize, &Stream) -> Result<DevicePtr> + Send + Sync + 'static,
        deallocate: impl Fn(DevicePtr, usize, &Stream) -> Result<()> + Send + Sync + 'static,
    ) -> Result<CallbackMemoryResource> {
        crate::resource::check_alignment("CallbackMemoryResource", alignment)?;
        Ok(CallbackMemoryResource {
            name: "CallbackMemoryResource".into(),
            device,
            alignment,
            dereferenceable: false,
            allocate: Box::new(allocate),
            deallocate: Box::new(deallocate),
        })
    }

    /// Declares that the closures hand out real memory of the device, so
    /// host copies and NumPy may dereference it
    /// ([`MemoryResource::dereferenceable`]); undeclared, they are refused.
    ///
    /// ```
    /// use devmm::{CallbackMemoryResource, Device, DevicePtr, MemoryResource};
    /// let fake = CallbackMemoryResource::new(Device::CPU, 1, |_, _| Ok(DevicePtr::from_addr(64)), |_, _, _| Ok(()))?;
    /// assert!(!fake.dereferenceable());
    /// assert!(fake.with_dereferenceable_memory(true).dereferenceable());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn with_dereferenceable_memory(mut self, dereferenceable: bool) -> Self {
        self.dereferenceable = dereferenceable;
        self
    }

    /// Names the resource in its `Debug` output, and so in every error and
    /// resource chain, after what defines it (a Python class) rather than
    /// `CallbackMemoryResource`.
    ///
    /// ```
    /// use devmm::{CallbackMemoryResource, Device, DevicePtr};
    /// let mr = CallbackMemoryResource::new(Device::CPU, 8, |_, _| Ok(DevicePtr::NULL), |_, _, _| Ok(()))?
    ///     .named("ArenaResource");
    /// assert_eq!(format!("{mr:?}"), "ArenaResource(device=cpu:0, alignment=8)");
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    fn misuse(&self, kind: MisuseKind, ptr: DevicePtr, nbytes: usize) -> Error {
        Error::Misuse {
            kind,
            ptr,
            nbytes,
            device: self.device,
            resource: format!("{self:?}"),
            test_double: false,
        }
    }
}

impl fmt::Debug for CallbackMemoryResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}(device={}, alignment={})",
            self.name, self.device, self.alignment
        )
    }
}

impl MemoryResource for CallbackMemoryResource {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let ptr = (self.allocate)(nbytes, stream)?;
        if ptr.is_null() && nbytes > 0 {
            return Err(self.misuse(MisuseKind::NullAllocation, ptr, nbytes));
        }
        if !ptr.is_aligned(self.alignment) {
            // Give the memory back rather than leak it; the caller never saw it.
            let _ = (self.deallocate)(ptr, nbytes, stream);
            let promised = self.alignment;
            return Err(self.misuse(MisuseKind::Misaligned { promised }, ptr, nbytes));
        }
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // `deallocate(NULL, 0)` reaches the closure: its allocate may have
        // returned NULL for a zero-byte request.
        crate::ledger::check_null(ptr, nbytes).map_err(|kind| self.misuse(kind, ptr, nbytes))?;
        (self.deallocate)(ptr, nbytes, stream)
    }

    fn device(&self) -> Device {
        self.device
    }

    fn guaranteed_alignment(&self) -> usize {
        self.alignment
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        crate::runtime::runtime_for(self.device)?.memory_info(self.device)
    }

    fn dereferenceable(&self) -> bool {
        self.dereferenceable
    }
}
