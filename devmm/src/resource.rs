//! The memory-resource contract, shaped like rmm's `device_memory_resource`.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::device::Device;
use crate::error::Result;
use crate::pool_statistics::PoolStatistics;
use crate::ptr::DevicePtr;
use crate::stream::Stream;

/// Free and total bytes, as a runtime or resource reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes still available.
    pub free: usize,
    /// Bytes in all.
    pub total: usize,
}

/// Something that hands out and takes back memory on one device.
///
/// Allocation is stream-ordered: a pointer from `allocate(n, s)` is ready
/// for use on `s`, and `deallocate(p, n, s)` frees it once the work queued
/// on `s` so far has finished. Resources that are not stream-ordered
/// (`stream_ordered() == false`) allocate and free synchronously and ignore
/// the stream. Zero-byte requests are legal and may return
/// [`DevicePtr::NULL`].
///
/// Failures are [`Error`](crate::Error)s that name the device, the size and
/// the resource chain; a resource never panics on a request it cannot serve.
///
/// ```
/// use devmm::{MallocMemoryResource, MemoryResource, Stream};
/// let mr = MallocMemoryResource::new();
/// let stream = Stream::cpu();
/// let p = mr.allocate(100, &stream)?;
/// assert!(p.is_aligned(mr.guaranteed_alignment()));
/// // SAFETY: `p` came from `mr.allocate(100, ..)` and is freed once.
/// unsafe { mr.deallocate(p, 100, &stream)? };
/// # Ok::<(), devmm::Error>(())
/// ```
pub trait MemoryResource: Send + Sync + fmt::Debug {
    /// Allocates `nbytes` on [`device`](Self::device), ordered on `stream`.
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr>;

    /// Returns `ptr` to the resource, ordered on `stream`.
    ///
    /// # Safety
    ///
    /// `ptr` must come from `allocate(nbytes, ..)` on this resource and not
    /// have been deallocated since; no work may still use it except work
    /// queued on `stream`. Resources that track their allocations
    /// ([`detects_misuse`](Self::detects_misuse)) report violations as
    /// [`Error::Misuse`](crate::Error::Misuse); others have undefined behaviour.
    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()>;

    /// The device the memory lives on.
    fn device(&self) -> Device;

    /// Writes the name [`resource_chain`] gives this resource: its `Debug`
    /// output unless the resource names itself (`#[memory_resource]`
    /// resources write `Name(device=cpu:0, alignment=64)`, as the shipped
    /// ones do). For an adaptor, the text up to the first `' '`, `'('` or
    /// `'{'` is its name.
    ///
    /// ```
    /// use devmm::{resource_chain, MallocMemoryResource};
    /// assert_eq!(
    ///     resource_chain(&MallocMemoryResource::new()),
    ///     "MallocMemoryResource(device=cpu:0, alignment=64)"
    /// );
    /// ```
    fn fmt_name(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }

    /// Whether allocation and deallocation are ordered on the stream passed
    /// (cudaMallocAsync) rather than immediate (cudaMalloc, malloc).
    fn stream_ordered(&self) -> bool {
        false
    }

    /// The alignment, in bytes, that every non-null pointer meets.
    fn guaranteed_alignment(&self) -> usize;

    /// Free and total memory as this resource sees it.
    fn available_memory(&self) -> Result<MemoryInfo>;

    /// The resource this one forwards to, for adaptors.
    fn upstream(&self) -> Option<&dyn MemoryResource> {
        None
    }

    /// Whether `deallocate` reports unknown pointers, wrong sizes and double
    /// frees as errors instead of undefined behaviour.
    fn detects_misuse(&self) -> bool {
        false
    }

    /// Whether a call may run code this resource was given rather than
    /// devmm's or a driver's: [`CallbackMemoryResource`](crate::CallbackMemoryResource)'s
    /// functions, [`FailureCallbackAdaptor`](crate::FailureCallbackAdaptor)'s
    /// callback. Such code may wait for locks devmm knows nothing of (a
    /// binding's interpreter lock), so a caller that calls its resource
    /// under a lock of its own refuses a chain with such a link
    /// ([`callback_of_chain`]). Adaptors answer for themselves only.
    ///
    /// ```
    /// use devmm::{MallocMemoryResource, MemoryResource};
    /// assert!(!MallocMemoryResource::new().runs_callbacks());
    /// ```
    fn runs_callbacks(&self) -> bool {
        false
    }

    /// The number of live allocations, for resources that track them.
    fn live_count(&self) -> Option<usize> {
        None
    }

    /// Whether the pointers this resource hands out are real memory of
    /// [`device`](Self::device), which a runtime's copies may write and read
    /// and host code may dereference when the device is host-accessible.
    ///
    /// Every shipped resource declares it; the default is `false`, so a
    /// resource that hands out made-up addresses (a testing double, a
    /// callback returning integers) is refused by every path that
    /// dereferences them ([`check_dereferenceable`]) instead of corrupting
    /// memory. Adaptors answer for their upstream.
    fn dereferenceable(&self) -> bool {
        false
    }

    /// What this resource stands for outside Rust, when it stands for
    /// something: the object a binding made it from (the Python resource
    /// behind a [`WithOrigin`](crate::WithOrigin)), so a binding handed the
    /// resource back (by the registry, by a buffer) returns that very
    /// object. Adaptors have their own identity and do not forward it.
    ///
    /// ```
    /// use devmm::{MallocMemoryResource, MemoryResource};
    /// assert!(MallocMemoryResource::new().origin().is_none());
    /// ```
    fn origin(&self) -> Option<&(dyn Any + Send + Sync)> {
        None
    }

    /// The figures of the memory pool this resource allocates from, for a
    /// resource over a pool of its own (`CudaAsyncMemoryResource`); `None`
    /// for every other. An adaptor answers `None`: its upstream, reached
    /// through [`upstream`](Self::upstream), answers for the pool.
    fn pool_statistics(&self) -> Option<Result<PoolStatistics>> {
        None
    }

    /// A descriptor another process maps the live block `ptr` of `nbytes`
    /// (allocated here) with: `Some` for a resource over a pool made for
    /// IPC (`CudaAsyncMemoryResource` with `enable_ipc`), `None` for every
    /// other. A transparent wrapper answers as its inner resource.
    fn ipc_export(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
    ) -> Option<Result<crate::ipc_data::IpcDescriptor>> {
        let _ = (ptr, nbytes);
        None
    }

    /// The legacy IPC handle (`cudaIpcGetMemHandle`) another process opens
    /// the live block `ptr` of `nbytes` (allocated here) with: `Some` for a
    /// resource over the driver's synchronous allocator
    /// (`CudaRuntimeMemoryResource` on `cudaMalloc`), `None` for every
    /// other. A transparent wrapper answers as its inner resource.
    fn ipc_handle(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
    ) -> Option<Result<crate::ipc_data::IpcMemHandle>> {
        let _ = (ptr, nbytes);
        None
    }

    /// The managed memory this resource hands out, whose pages can be
    /// prefetched and advised ([`prefetch`](crate::prefetch),
    /// [`advise`](crate::advise)): the managed resources answer, adaptors
    /// answer for their upstream, every other resource `None`.
    ///
    /// ```
    /// use devmm::{MallocMemoryResource, MemoryResource};
    /// assert!(MallocMemoryResource::new().managed_memory().is_none());
    /// ```
    fn managed_memory(&self) -> Option<&dyn crate::managed_memory::ManagedMemory> {
        None
    }

    /// The most resource calls a call into this resource nests, known from
    /// its type alone: `Some(0)` for a resource that calls no other
    /// resource (the platform allocators), `Some(n + 1)` for an adaptor
    /// over one that nests `n`, and `None` (the default) where the type
    /// does not say: a type-erased upstream (`Arc<dyn MemoryResource>`), a
    /// callback into other code.
    ///
    /// An adaptor counts the calls nested on its thread and refuses one too
    /// deep for the native stack with
    /// [`Error::ChainTooDeep`](crate::Error::ChainTooDeep); over an upstream
    /// whose type bounds its depth to a few links it skips that count, so a
    /// chain built from concrete types pays nothing for it. Claiming a bound
    /// the resource does not keep (calling into a chain of any depth from a
    /// resource that answers `Some`) lets such a chain overflow the native
    /// stack, which aborts the process.
    ///
    /// ```
    /// use devmm::{LimitingAdaptor, MallocMemoryResource, MemoryResource};
    /// use std::sync::Arc;
    /// assert_eq!(MallocMemoryResource::nesting_bound(), Some(0));
    /// assert_eq!(LimitingAdaptor::<MallocMemoryResource>::nesting_bound(), Some(1));
    /// assert_eq!(LimitingAdaptor::<Arc<dyn MemoryResource>>::nesting_bound(), None);
    /// ```
    fn nesting_bound() -> Option<usize>
    where
        Self: Sized,
    {
        None
    }

    /// Which of devmm's own resources this is: `None` for every other
    /// resource, adaptors included (they have an identity of their own); a
    /// transparent wrapper answers as its inner resource.
    ///
    /// ```
    /// use devmm::{MallocMemoryResource, MemoryResource, ShippedResource, StatisticsAdaptor};
    /// assert_eq!(MallocMemoryResource::new().shipped(), Some(ShippedResource::Malloc));
    /// assert_eq!(StatisticsAdaptor::new(MallocMemoryResource::new()).shipped(), None);
    /// ```
    fn shipped(&self) -> Option<crate::ShippedResource> {
        None
    }
}

/// Refuses `operation` (a host copy, NumPy's allocator, ...) unless `mr`
/// declares its pointers [`dereferenceable`](MemoryResource::dereferenceable),
/// with an [`Error::NotDereferenceable`](crate::Error::NotDereferenceable)
/// naming the chain.
///
/// ```
/// use devmm::testing::RecordingMemoryResource;
/// use devmm::{check_dereferenceable, Error, MallocMemoryResource};
/// assert!(check_dereferenceable(&MallocMemoryResource::new(), "a host copy").is_ok());
/// let refused = check_dereferenceable(&RecordingMemoryResource::new(), "a host copy");
/// assert!(matches!(refused, Err(Error::NotDereferenceable { .. })));
/// ```
pub fn check_dereferenceable(mr: &dyn MemoryResource, operation: &'static str) -> Result<()> {
    if mr.dereferenceable() {
        return Ok(());
    }
    Err(crate::Error::NotDereferenceable {
        operation,
        device: mr.device(),
        chain: resource_chain(mr),
    })
}

/// Waits until `stream` has reached a block `mr` just allocated on it, so
/// the host may write the block at once (NumPy's allocator, Numba's pinned
/// arrays): a stream-ordered resource hands out blocks freed on the stream
/// that work queued before the allocation (a copy from the last array
/// there) may still read. A resource that is not stream-ordered serves
/// blocks no queued work touches, and this returns at once without a
/// driver call.
///
/// ```
/// use devmm::{wait_for_allocation, MallocMemoryResource, MemoryResource, Stream};
/// let mr = MallocMemoryResource::new();
/// let stream = Stream::cpu();
/// let ptr = mr.allocate(64, &stream)?;
/// wait_for_allocation(&mr, &stream)?; // not stream-ordered: nothing to wait for
/// // SAFETY: allocated above with the same size and stream, freed once.
/// unsafe { mr.deallocate(ptr, 64, &stream)? };
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn wait_for_allocation(mr: &dyn MemoryResource, stream: &Stream) -> Result<()> {
    if mr.stream_ordered() {
        stream.synchronize()
    } else {
        Ok(())
    }
}

/// The device memory from `resource` lives on, checked against the device
/// `asked` for alongside it (`None`: whatever the resource's is): the one
/// rule for a device and a resource named together, as buffer
/// constructors and
/// [`EmptyOptions::target_device`](crate::EmptyOptions::target_device)
/// apply it. Another device is an [`Error::Refused`](crate::Error::Refused).
///
/// ```
/// use devmm::{device_for, Device, MallocMemoryResource};
/// let malloc = MallocMemoryResource::new();
/// assert_eq!(device_for(&malloc, None)?, Device::CPU);
/// assert_eq!(device_for(&malloc, Some(Device::CPU))?, Device::CPU);
/// let refused = device_for(&malloc, Some(Device::cuda(0))).unwrap_err();
/// assert!(refused.to_string().starts_with("device cuda:0 was asked for, but mr lives on cpu:0"));
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn device_for(resource: &dyn MemoryResource, asked: Option<Device>) -> Result<Device> {
    let device = resource.device();
    match asked {
        Some(asked) if asked != device => Err(crate::Error::Refused {
            reason: format!(
                "device {asked} was asked for, but mr lives on {device} ({resource:?} allocates \
                 on {device} only); pass a resource of {asked} or drop the device argument"
            ),
        }),
        _ => Ok(device),
    }
}

/// The one rule for the alignment a resource promises: a power of two (1
/// promises nothing); anything else is an
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `resource`.
///
/// ```
/// use devmm::check_alignment;
/// assert!(check_alignment("MyResource", 256).is_ok());
/// let err = check_alignment("MyResource", 48).unwrap_err();
/// assert_eq!(err.to_string(), "invalid argument: MyResource alignment must be a power of two (1 for none), not 48");
/// ```
pub fn check_alignment(resource: &str, alignment: usize) -> Result<()> {
    if alignment.is_power_of_two() {
        return Ok(());
    }
    Err(crate::Error::InvalidArgument {
        reason: format!(
            "{resource} alignment must be a power of two (1 for none), not {alignment}"
        ),
    })
}

/// The resource chain from `mr` down, outermost first:
/// `StatisticsAdaptor -> LimitingAdaptor(limit=64) -> MallocMemoryResource(device=cpu:0, alignment=64)`.
///
/// ```
/// use devmm::{resource_chain, MallocMemoryResource, StatisticsAdaptor};
/// let mr = StatisticsAdaptor::new(MallocMemoryResource::new());
/// assert_eq!(
///     resource_chain(&mr),
///     "StatisticsAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)"
/// );
/// ```
pub fn resource_chain(mr: &dyn MemoryResource) -> String {
    let mut chain = String::new();
    let mut next = Some(mr);
    let mut shown = 0;
    while let Some(mr) = next {
        if shown > 0 {
            chain.push_str(" -> ");
        }
        if shown == CHAIN_LINKS_SHOWN {
            chain.push_str("... (deeper links not shown)");
            break;
        }
        push_link_name(&mut chain, mr);
        shown += 1;
        next = mr.upstream();
    }
    chain
}

/// The first link of `mr`'s chain with a pool of its own (through any
/// adaptors), with that pool's figures; `None` when no link has one.
///
/// ```
/// use devmm::{MallocMemoryResource, StatisticsAdaptor, pool_of_chain};
/// assert!(pool_of_chain(&StatisticsAdaptor::new(MallocMemoryResource::new())).is_none());
/// ```
pub fn pool_of_chain(
    mr: &dyn MemoryResource,
) -> Option<(&dyn MemoryResource, Result<PoolStatistics>)> {
    let mut next = Some(mr);
    while let Some(link) = next {
        if let Some(figures) = link.pool_statistics() {
            return Some((link, figures));
        }
        next = link.upstream();
    }
    None
}

/// The first link of `mr`'s chain (through any adaptors) that
/// [runs code it was given](MemoryResource::runs_callbacks); `None` when
/// every link is devmm's or a driver's.
///
/// ```
/// use devmm::{callback_of_chain, FailureCallbackAdaptor, MallocMemoryResource, StatisticsAdaptor};
/// assert!(callback_of_chain(&StatisticsAdaptor::new(MallocMemoryResource::new())).is_none());
/// let retrying = FailureCallbackAdaptor::new(MallocMemoryResource::new(), |_, _, _| Ok(false));
/// let counted = StatisticsAdaptor::new(retrying);
/// assert!(callback_of_chain(&counted).is_some());
/// ```
pub fn callback_of_chain(mr: &dyn MemoryResource) -> Option<&dyn MemoryResource> {
    let mut next = Some(mr);
    while let Some(link) = next {
        if link.runs_callbacks() {
            return Some(link);
        }
        next = link.upstream();
    }
    None
}

/// The links [`resource_chain`] names at most: enough for any chain built
/// on purpose, and a bound on the walk and the text for one built in a
/// loop (a tracking adaptor names its chain as it is made, so an unbounded
/// walk made a deep chain of them quadratic to build).
const CHAIN_LINKS_SHOWN: usize = 32;

/// Appends one link of a chain: the resource's Debug output, but of an
/// adaptor only its name, cut at the first `' '`, `'('` or `'{'` before the
/// rest is formatted (the rest is its whole upstream chain, whose
/// formatting would make naming a chain quadratic in its depth).
fn push_link_name(out: &mut String, mr: &dyn MemoryResource) {
    use std::fmt::Write;
    /// The link's own name ([`MemoryResource::fmt_name`]).
    struct Named<'a>(&'a dyn MemoryResource);
    impl fmt::Display for Named<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.fmt_name(f)
        }
    }
    let mr = Named(mr);
    if mr.0.upstream().is_none() {
        let _ = write!(out, "{mr}");
        return;
    }
    /// Takes the text up to the name's end, then refuses the rest.
    struct Name<'a> {
        out: &'a mut String,
        ended: bool,
    }
    impl Write for Name<'_> {
        fn write_str(&mut self, text: &str) -> fmt::Result {
            if self.ended {
                return Err(fmt::Error);
            }
            match text.find([' ', '(', '{']) {
                Some(end) => {
                    self.out.push_str(&text[..end]);
                    self.ended = true;
                    Err(fmt::Error)
                }
                None => {
                    self.out.push_str(text);
                    Ok(())
                }
            }
        }
    }
    // An error here is the name's end, by design.
    let _ = write!(Name { out, ended: false }, "{mr}");
}

/// The probes every wrapper of one resource answers as that resource
/// does, from its field `$field`: device, stream ordering, alignment,
/// dereferenceability and managed memory.
macro_rules! forward_device_probes {
    ($field:ident) => {
        fn device(&self) -> $crate::Device {
            self.$field.device()
        }

        fn stream_ordered(&self) -> bool {
            self.$field.stream_ordered()
        }

        fn guaranteed_alignment(&self) -> usize {
            self.$field.guaranteed_alignment()
        }

        fn dereferenceable(&self) -> bool {
            self.$field.dereferenceable()
        }

        fn managed_memory(&self) -> Option<&dyn $crate::managed_memory::ManagedMemory> {
            self.$field.managed_memory()
        }
    };
}

pub(crate) use forward_device_probes;

/// The probes a transparent wrapper (the same resource with something
/// added: a ledger, an origin) forwards to its field `$field`, its place in
/// a resource chain included. The wrapper writes `allocate`, `deallocate`,
/// `detects_misuse`, `live_count` and `origin` itself.
macro_rules! forward_transparent_probes {
    ($field:ident) => {
        $crate::resource::forward_device_probes!($field);

        fn available_memory(&self) -> $crate::Result<$crate::MemoryInfo> {
            self.$field.available_memory()
        }

        fn upstream(&self) -> Option<&dyn $crate::MemoryResource> {
            self.$field.upstream()
        }

        fn runs_callbacks(&self) -> bool {
            self.$field.runs_callbacks()
        }

        fn fmt_name(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
            self.$field.fmt_name(f)
        }

        fn pool_statistics(&self) -> Option<$crate::Result<$crate::PoolStatistics>> {
            self.$field.pool_statistics()
        }

        fn shipped(&self) -> Option<$crate::ShippedResource> {
            self.$field.shipped()
        }

        fn ipc_export(
            &self,
            ptr: $crate::DevicePtr,
            nbytes: usize,
        ) -> Option<$crate::Result<$crate::ipc_data::IpcDescriptor>> {
            self.$field.ipc_export(ptr, nbytes)
        }

        fn ipc_handle(
            &self,
            ptr: $crate::DevicePtr,
            nbytes: usize,
        ) -> Option<$crate::Result<$crate::ipc_data::IpcMemHandle>> {
            self.$field.ipc_handle(ptr, nbytes)
        }
    };
}

pub(crate) use forward_transparent_probes;

macro_rules! forward_memory_resource {
    ($($wrapper:ident),*) => {$(
        impl<T: MemoryResource + ?Sized> MemoryResource for $wrapper<T> {
            fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
                (**self).allocate(nbytes, stream)
            }
            unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
                // SAFETY: the caller upholds the contract for the pointee.
                unsafe { (**self).deallocate(ptr, nbytes, stream) }
            }
            fn device(&self) -> Device {
                (**self).device()
            }
            fn fmt_name(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                (**self).fmt_name(f)
            }
            fn stream_ordered(&self) -> bool {
                (**self).stream_ordered()
            }
            fn guaranteed_alignment(&self) -> usize {
                (**self).guaranteed_alignment()
            }
            fn available_memory(&self) -> Result<MemoryInfo> {
                (**self).available_memory()
            }
            fn upstream(&self) -> Option<&dyn MemoryResource> {
                (**self).upstream()
            }
            fn detects_misuse(&self) -> bool {
                (**self).detects_misuse()
            }
            fn runs_callbacks(&self) -> bool {
                (**self).runs_callbacks()
            }
            fn live_count(&self) -> Option<usize> {
                (**self).live_count()
            }
            fn dereferenceable(&self) -> bool {
                (**self).dereferenceable()
            }
            fn origin(&self) -> Option<&(dyn Any + Send + Sync)> {
                (**self).origin()
            }
            fn pool_statistics(&self) -> Option<Result<PoolStatistics>> {
                (**self).pool_statistics()
            }
            fn ipc_export(
                &self,
                ptr: DevicePtr,
                nbytes: usize,
            ) -> Option<Result<crate::ipc_data::IpcDescriptor>> {
                (**self).ipc_export(ptr, nbytes)
            }
            fn ipc_handle(
                &self,
                ptr: DevicePtr,
                nbytes: usize,
            ) -> Option<Result<crate::ipc_data::IpcMemHandle>> {
                (**self).ipc_handle(ptr, nbytes)
            }
            fn managed_memory(&self) -> Option<&dyn crate::managed_memory::ManagedMemory> {
                (**self).managed_memory()
            }
            fn shipped(&self) -> Option<crate::ShippedResource> {
                (**self).shipped()
            }
        }
    )*};
}

forward_memory_resource!(Arc, Box);
