//! NEP 49 both ways: NumPy allocating through a devmm resource (the
//! `PyDataMem_Handler` struct NumPy calls, filled with C callbacks over a
//! resource: [`Nep49Handler`]), and a NumPy handler as a devmm resource
//! ([`Nep49Resource`]). A binding finds NumPy's handlers and wraps ours in
//! the capsule `PyDataMem_SetHandler` takes; NumPy is never linked here.

use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource, resource_chain};
use crate::stream::Stream;

/// NumPy's `PyDataMemAllocator` (version 1).
#[repr(C)]
#[derive(Debug)]
pub struct DataMemAllocator {
    /// Passed back to every callback.
    pub ctx: *mut c_void,
    /// `malloc(ctx, size)`.
    pub malloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    /// `calloc(ctx, nelem, elsize)`.
    pub calloc: unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void,
    /// `realloc(ctx, ptr, new_size)`.
    pub realloc: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void,
    /// `free(ctx, ptr, size)`.
    pub free: unsafe extern "C" fn(*mut c_void, *mut c_void, usize),
}

/// NumPy's `PyDataMem_Handler`: a name and an allocator.
#[repr(C)]
#[derive(Debug)]
pub struct DataMemHandler {
    /// NUL-padded.
    pub name: [c_char; 127],
    /// 1.
    pub version: u8,
    /// The callbacks.
    pub allocator: DataMemAllocator,
}

impl DataMemHandler {
    /// The handler's name, up to its NUL.
    pub fn name(&self) -> String {
        self.name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8 as char)
            .collect()
    }
}

/// Runs a resource call made on NumPy's behalf; a binding passes one that
/// drops what its own error conversion would otherwise keep.
pub type CallScope = fn(&mut dyn FnMut());

/// The state behind the handler: the resource and the size of every live
/// block, since NumPy's `realloc` does not say how big the old block was.
struct Context {
    mr: Arc<dyn MemoryResource>,
    stream: Stream,
    scope: CallScope,
    sizes: Mutex<HashMap<usize, usize>>,
}

/// A NumPy data-memory handler over a resource: NumPy's struct first, so a
/// pointer to it is both the `PyDataMem_Handler*` NumPy reads and the
/// block to release. Every array NumPy allocates through it keeps the
/// binding's capsule, and so this handler, alive.
///
/// ```
/// use devmm::interop::Nep49Handler;
/// use devmm::{MallocMemoryResource, Stream};
/// let mr = std::sync::Arc::new(MallocMemoryResource::new());
/// let handler = Nep49Handler::create(mr, Stream::cpu(), |call| call());
/// // SAFETY: called as NumPy calls them, on a live handler, released once.
/// unsafe {
///     let allocator = &(*handler).handler.allocator;
///     let p = (allocator.calloc)(allocator.ctx, 4, 2);
///     assert_eq!(std::slice::from_raw_parts(p.cast::<u8>(), 8), &[0; 8]);
///     (allocator.free)(allocator.ctx, p, 8);
///     assert_eq!((*handler).handler.name(), "devmm");
///     Nep49Handler::release(handler);
/// }
/// ```
#[repr(C)]
pub struct Nep49Handler {
    /// What NumPy reads.
    pub handler: DataMemHandler,
    context: Context,
}

impl std::fmt::Debug for Nep49Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Nep49Handler({:?})", self.context.mr)
    }
}

impl Nep49Handler {
    /// The name NumPy reports for devmm's handlers.
    pub const NAME: &'static str = "devmm";

    /// Whether `mr` can back NumPy's arrays: NumPy dereferences its data
    /// on the host, so the memory must be host-accessible and the resource
    /// declared [`dereferenceable`](MemoryResource::dereferenceable), and a
    /// resource that allocates through NumPy's own handler would make a
    /// cycle. Each refusal says what to use instead.
    ///
    /// ```
    /// use devmm::interop::Nep49Handler;
    /// use devmm::testing::RecordingMemoryResource;
    /// use devmm::MallocMemoryResource;
    /// assert!(Nep49Handler::check_resource(&MallocMemoryResource::new()).is_ok());
    /// assert!(Nep49Handler::check_resource(&RecordingMemoryResource::new()).is_err());
    /// ```
    pub fn check_resource(mr: &dyn MemoryResource) -> Result<()> {
        if !mr.device().ty().is_host_accessible() {
            return Err(Error::Refused {
                reason: format!(
                    "NumPy dereferences its data on the host, so the installed resource must \
                     live on the cpu device (or pinned host memory); a resource on {} cannot \
                     back NumPy arrays",
                    mr.device()
                ),
            });
        }
        crate::check_dereferenceable(mr, "NumPy's allocator (NEP 49)")?;
        if resource_chain(mr).contains(Nep49Resource::NAME) {
            return Err(Error::Refused {
                reason: "installing a resource that allocates through NumPy's own handler as \
                         NumPy's handler would create an allocation cycle; wrap another resource"
                    .into(),
            });
        }
        Ok(())
    }

    /// A handler allocating from `mr` (host memory) on `stream`, each
    /// resource call run inside `scope`; owned by the caller until
    /// [`release`](Self::release).
    pub fn create(
        mr: Arc<dyn MemoryResource>,
        stream: Stream,
        scope: CallScope,
    ) -> *mut Nep49Handler {
        let mut name = [0 as c_char; 127];
        for (dst, &src) in name.iter_mut().zip(Self::NAME.as_bytes()) {
            *dst = src as c_char;
        }
        let block = Box::into_raw(Box::new(Nep49Handler {
            handler: DataMemHandler {
                name,
                version: 1,
                allocator: DataMemAllocator {
                    ctx: std::ptr::null_mut(),
                    malloc: handler_malloc,
                    calloc: handler_calloc,
                    realloc: handler_realloc,
                    free: handler_free,
                },
            },
            context: Context {
                mr,
                stream,
                scope,
                sizes: Mutex::default(),
            },
        }));
        // SAFETY: `block` is a fresh, valid Box pointer; the context field
        // lives as long as the block.
        unsafe { (*block).handler.allocator.ctx = std::ptr::addr_of_mut!((*block).context).cast() };
        block
    }

    /// Frees a handler [`create`](Self::create) made.
    ///
    /// # Safety
    ///
    /// `handler` came from `create`, is released once, and NumPy no longer
    /// calls it.
    pub unsafe fn release(handler: *mut Nep49Handler) {
        // SAFETY: the caller's contract: the Box `create` leaked.
        drop(unsafe { Box::from_raw(handler) });
    }
}

impl Context {
    fn sizes(&self) -> MutexGuard<'_, HashMap<usize, usize>> {
        // One insert or remove per update: never left half-done.
        self.sizes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `call` inside the binding's scope, stopping a panic (a bug)
    /// here: unwinding into NumPy's C would abort the process.
    fn contained<T>(&self, call: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut call = Some(call);
        let mut result = None;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (self.scope)(&mut || result = call.take().map(|f| f()));
        }));
        match (caught, result) {
            (Ok(()), Some(result)) => result,
            _ => Err(Error::InvalidArgument {
                reason: "a devmm resource panicked inside NumPy's allocator; please report it"
                    .into(),
            }),
        }
    }

    fn allocate(&self, nbytes: usize) -> *mut c_void {
        // NumPy treats NULL as failure, so even empty arrays get a byte.
        let nbytes = nbytes.max(1);
        // NumPy gets NULL and raises its own MemoryError, so any other
        // cause (a resource's bug) is logged: the caller never sees it. An
        // out-of-memory error runs the `on_out_of_memory` hooks first, as
        // devmm's own entry points do.
        let allocate = || {
            let ptr = crate::observe_allocation(|| self.mr.allocate(nbytes, &self.stream))?;
            // NumPy writes the block as soon as it has it.
            if let Err(error) = crate::wait_for_allocation(&*self.mr, &self.stream) {
                // SAFETY: allocated just above, never handed out, freed once.
                let _ = unsafe { self.mr.deallocate(ptr, nbytes, &self.stream) };
                return Err(error);
            }
            Ok(ptr)
        };
        match self.contained(allocate) {
            Ok(ptr) if !ptr.is_null() => {
                self.sizes().insert(ptr.addr(), nbytes);
                ptr.as_host_ptr()
            }
            Ok(_) => std::ptr::null_mut(),
            Err(error) if error.is_out_of_memory() => std::ptr::null_mut(),
            Err(error) => {
                tracing::error!(target: "devmm::mr", nbytes, %error, "NumPy's allocator (NEP 49) failed");
                std::ptr::null_mut()
            }
        }
    }

    fn free(&self, ptr: *mut c_void) {
        if ptr.is_null() {
            return;
        }
        // Bound first so the table's lock is released before `deallocate`,
        // which may call back into NumPy (and so into this handler).
        let removed = self.sizes().remove(&(ptr as usize));
        let Some(nbytes) = removed else {
            tracing::error!(
                target: "devmm::mr",
                ptr = ptr.addr() as u64,
                "NumPy's allocator (NEP 49) was asked to free a block it did not allocate; nothing was freed"
            );
            return;
        };
        // NumPy's free cannot fail: an error is logged, not raised.
        let result = self.contained(|| {
            // SAFETY: `ptr` is live in our table, so it came from
            // `mr.allocate(nbytes)` and has not been freed.
            unsafe {
                self.mr
                    .deallocate(DevicePtr::from_host_ptr(ptr), nbytes, &self.stream)
            }
        });
        if let Err(error) = result {
            tracing::error!(
                target: "devmm::mr",
                ptr = ptr.addr() as u64,
                nbytes,
                %error,
                "NumPy's allocator (NEP 49) could not free"
            );
        }
    }
}

/// # Safety
///
/// `ctx` is the context of a live [`Nep49Handler`].
unsafe fn context<'a>(ctx: *mut c_void) -> &'a Context {
    // SAFETY: the caller's contract; the capsule, and so the handler,
    // outlives every array NumPy allocated through it.
    unsafe { &*(ctx as *const Context) }
}

unsafe extern "C" fn handler_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: NumPy passes the ctx of a live handler.
    unsafe { context(ctx) }.allocate(size)
}

unsafe extern "C" fn handler_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    let Some(size) = nelem.checked_mul(elsize) else {
        return std::ptr::null_mut();
    };
    // SAFETY: as in `handler_malloc`.
    let ptr = unsafe { context(ctx) }.allocate(size);
    if !ptr.is_null() {
        // SAFETY: the block is host memory (the binding checks the resource
        // is) of at least `size` bytes, just allocated and not shared yet.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, size) };
    }
    ptr
}

unsafe extern "C" fn handler_realloc(
    ctx: *mut c_void,
    ptr: *mut c_void,
    size: usize,
) -> *mut c_void {
    // SAFETY: as in `handler_malloc`.
    let ctx = unsafe { context(ctx) };
    let old = if ptr.is_null() {
        0
    } else {
        let known = ctx.sizes().get(&(ptr as usize)).copied();
        match known {
            Some(n) => n,
            None => {
                tracing::error!(
                    target: "devmm::mr",
                    ptr = ptr.addr() as u64,
                    "NumPy's allocator (NEP 49) was asked to realloc a block it did not allocate"
                );
                return std::ptr::null_mut();
            }
        }
    };
    let new = ctx.allocate(size);
    if !new.is_null() && !ptr.is_null() {
        // SAFETY: both blocks are live host memory of at least the copied
        // length, and distinct allocations cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), new.cast::<u8>(), old.min(size)) };
        ctx.free(ptr);
    }
    new
}

unsafe extern "C" fn handler_free(ctx: *mut c_void, ptr: *mut c_void, _size: usize) {
    // SAFETY: as in `handler_malloc`.
    unsafe { context(ctx) }.free(ptr);
}

/// A NumPy data-memory handler (NumPy's current one, when a binding makes
/// it) as a devmm resource on the CPU. `scope` runs each call into the
/// handler (a binding takes the interpreter lock NumPy's default handler
/// assumes; a scope that does not run the call means no memory).
pub struct Nep49Resource {
    /// Keeps the handler `handler` points into alive (the binding's capsule).
    _owner: Box<dyn Any + Send + Sync>,
    handler: *const DataMemHandler,
    name: String,
    scope: CallScope,
}

impl Nep49Resource {
    /// The resource's name in chains and errors.
    pub const NAME: &'static str = "NumpyHandlerMemoryResource";
    /// What malloc promises on the platforms NumPy supports.
    pub const ALIGNMENT: usize = 16;

    /// A resource over `handler`, which `owner` keeps alive.
    ///
    /// # Safety
    ///
    /// `handler` points to a valid `PyDataMem_Handler` for as long as
    /// `owner` lives, whose callbacks may be called from any thread inside
    /// `scope`.
    pub unsafe fn new(
        handler: *const DataMemHandler,
        owner: Box<dyn Any + Send + Sync>,
        scope: CallScope,
    ) -> Nep49Resource {
        // SAFETY: the caller's contract.
        let name = unsafe { &*handler }.name();
        Nep49Resource {
            _owner: owner,
            handler,
            name,
            scope,
        }
    }

    fn allocator(&self) -> &DataMemAllocator {
        // SAFETY: `handler` points into what `_owner` keeps alive.
        unsafe { &(*self.handler).allocator }
    }

    fn free(&self, ptr: DevicePtr, nbytes: usize) {
        let allocator = self.allocator();
        // SAFETY: the caller hands back a block this allocator made with `nbytes`.
        (self.scope)(&mut || unsafe { (allocator.free)(allocator.ctx, ptr.as_host_ptr(), nbytes) });
    }
}

impl fmt::Debug for Nep49Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As the seed's repr: its device, and the handler's name as
        // Python's `repr` of a str writes it.
        write!(
            f,
            "{}(device={}, handler={})",
            Self::NAME,
            self.device(),
            python_str_repr(&self.name)
        )
    }
}

/// `text` as Python's `repr` of a `str` writes it: in single quotes unless
/// it holds a single quote and no double quote, the chosen quote and
/// backslashes escaped, and what is not printable as `\n`, `\xNN`,
/// `\uNNNN` or `\UNNNNNNNN` (control characters and separators other
/// than the space; printable non-ASCII text stays as it is).
fn python_str_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                let code = u32::from(c);
                let escaped = match code {
                    0..=0xff => format!("\\x{code:02x}"),
                    0x100..=0xffff => format!("\\u{code:04x}"),
                    _ => format!("\\U{code:08x}"),
                };
                out.push_str(&escaped);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

impl MemoryResource for Nep49Resource {
    fn allocate(&self, nbytes: usize, _stream: &Stream) -> Result<DevicePtr> {
        if nbytes == 0 {
            return Ok(DevicePtr::NULL);
        }
        let allocator = self.allocator();
        let mut ptr = std::ptr::null_mut();
        // SAFETY: the allocator and its ctx live as long as `_owner`.
        (self.scope)(&mut || ptr = unsafe { (allocator.malloc)(allocator.ctx, nbytes) });
        let ptr = DevicePtr::from_host_ptr(ptr);
        if ptr.is_null() {
            return Err(Error::OutOfMemory {
                device: Device::CPU,
                nbytes,
                chain: format!("{self:?}"),
                detail: Some("the NumPy handler returned NULL".into()),
                pool: None,
            });
        }
        if !ptr.is_aligned(Self::ALIGNMENT) {
            self.free(ptr, nbytes);
            return Err(Error::Misuse {
                kind: MisuseKind::Misaligned {
                    promised: Self::ALIGNMENT,
                },
                ptr,
                nbytes,
                device: Device::CPU,
                resource: format!("{self:?}"),
                test_double: false,
            });
        }
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, _stream: &Stream) -> Result<()> {
        if !ptr.is_null() {
            self.free(ptr, nbytes);
        }
        Ok(())
    }

    fn device(&self) -> Device {
        Device::CPU
    }

    fn guaranteed_alignment(&self) -> usize {
        Self::ALIGNMENT
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        crate::runtime_for(Device::CPU)?.memory_info(Device::CPU)
    }

    fn dereferenceable(&self) -> bool {
        true
    }
}

// SAFETY: the handler pointer is only read, and `new`'s caller vouches that
// the handler may be called from any thread inside `scope`.
unsafe impl Send for Nep49Resource {}
// SAFETY: as for Send: shared access only reads the pointer.
unsafe impl Sync for Nep49Resource {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MallocMemoryResource;

    #[test]
    fn handler_names_are_written_as_python_writes_a_str() {
        let cases = [
            ("default_allocator", "'default_allocator'"),
            ("it's", "\"it's\""),
            ("say \"hi\"", "'say \"hi\"'"),
            ("both ' and \"", "'both \\' and \"'"),
            ("back\\slash", "'back\\\\slash'"),
            ("line\nbreak\ttab\u{7}bell", "'line\\nbreak\\ttab\\x07bell'"),
            ("\u{85}\u{2028}", "'\\x85\\u2028'"),
            ("caf\u{e9} \u{1F600}", "'caf\u{e9} \u{1F600}'"),
        ];
        for (name, repr) in cases {
            assert_eq!(python_str_repr(name), repr, "{name:?}");
        }
    }

    #[test]
    fn realloc_keeps_the_bytes_and_frees_the_old_block() {
        let mr: Arc<dyn MemoryResource> =
            Arc::new(crate::Checked::new(MallocMemoryResource::new()));
        let handler = Nep49Handler::create(Arc::clone(&mr), Stream::cpu(), |call| call());
        // SAFETY: called as NumPy calls them, on a live handler, released once.
        unsafe {
            let a = &(*handler).handler.allocator;
            let p = (a.malloc)(a.ctx, 4);
            std::ptr::copy_nonoverlapping(b"abcd".as_ptr(), p.cast::<u8>(), 4);
            let q = (a.realloc)(a.ctx, p, 8);
            assert_eq!(std::slice::from_raw_parts(q.cast::<u8>(), 4), b"abcd");
            assert_eq!(mr.live_count(), Some(1));
            assert!((a.realloc)(a.ctx, 0x10 as *mut c_void, 8).is_null());
            assert!((a.calloc)(a.ctx, usize::MAX, 2).is_null());
            (a.free)(a.ctx, q, 8);
            (a.free)(a.ctx, std::ptr::null_mut(), 0);
            Nep49Handler::release(handler);
        }
        assert_eq!(mr.live_count(), Some(0));
    }

    #[test]
    fn numpy_needs_dereferenceable_host_memory() {
        use crate::testing::RecordingMemoryResource;
        let gpu = RecordingMemoryResource::on_device(Device::cuda(0));
        let err = Nep49Handler::check_resource(&gpu).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("a resource on cuda:0 cannot back NumPy arrays")
        );
        let undeclared = Nep49Handler::check_resource(&RecordingMemoryResource::new());
        assert!(matches!(undeclared, Err(Error::NotDereferenceable { .. })));
        assert!(Nep49Handler::check_resource(&MallocMemoryResource::new()).is_ok());
    }

    #[test]
    fn a_handler_serves_as_a_resource() {
        let upstream = Arc::new(MallocMemoryResource::new());
        let handler = Nep49Handler::create(upstream, Stream::cpu(), |call| call());
        struct Owner(*mut Nep49Handler);
        // SAFETY: the handler is only released by the owner's drop.
        unsafe impl Send for Owner {}
        // SAFETY: as above.
        unsafe impl Sync for Owner {}
        impl Drop for Owner {
            fn drop(&mut self) {
                // SAFETY: created above, released once, no use after.
                unsafe { Nep49Handler::release(self.0) }
            }
        }
        // SAFETY: the owner keeps the handler alive; its callbacks are thread-safe.
        let mr = unsafe {
            Nep49Resource::new(
                std::ptr::addr_of!((*handler).handler),
                Box::new(Owner(handler)),
                |call| call(),
            )
        };
        assert_eq!(
            format!("{mr:?}"),
            "NumpyHandlerMemoryResource(device=cpu:0, handler='devmm')"
        );
        let ptr = mr.allocate(24, &Stream::cpu()).unwrap();
        assert!(!ptr.is_null() && ptr.is_aligned(Nep49Resource::ALIGNMENT));
        assert_eq!(mr.allocate(0, &Stream::cpu()).unwrap(), DevicePtr::NULL);
        // SAFETY: allocated above with 24 bytes.
        unsafe { mr.deallocate(ptr, 24, &Stream::cpu()).unwrap() };
        // Installed as NumPy's handler, it would allocate through itself.
        let cycle = Nep49Handler::check_resource(&mr).unwrap_err();
        assert!(
            cycle
                .to_string()
                .contains("would create an allocation cycle"),
            "{cycle}"
        );
        // A scope that does not run the call leaves no memory.
        // SAFETY: as above.
        let starved = unsafe {
            Nep49Resource::new(std::ptr::addr_of!((*handler).handler), Box::new(()), |_| {})
        };
        assert!(matches!(
            starved.allocate(8, &Stream::cpu()),
            Err(Error::OutOfMemory { .. })
        ));
        drop(starved);
    }
}
