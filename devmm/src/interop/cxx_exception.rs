//! Throwing C++'s `std::bad_alloc` into a C++ caller.
//!
//! PyTorch's pluggable allocator hook does not check the pointer a
//! binding's allocation entry point (over [`super::TorchRoutes`]) returns:
//! a NULL would become a tensor over address 0 and the next kernel would
//! fault. The one failure it stops on is a C++ exception, which its Python
//! binding turns into a `RuntimeError` (the reason, and why it cannot be
//! `torch.OutOfMemoryError`, is ADR 0015).
//!
//! The C++ runtime is reached at run time (the process that calls the hook
//! has PyTorch, and so libstdc++, loaded), so neither devmm nor the
//! extension module links a C++ runtime. The exception is built by the
//! Itanium C++ ABI that GCC and Clang follow on Linux:
//! `__cxa_allocate_exception`, the object's vtable pointer, `__cxa_throw`
//! with its `type_info`.

use std::ffi::c_void;
use std::sync::OnceLock;

type AllocateException = unsafe extern "C" fn(usize) -> *mut c_void;
type Destructor = unsafe extern "C" fn(*mut c_void);
type Throw = unsafe extern "C-unwind" fn(*mut c_void, *const c_void, Destructor) -> !;

/// The pieces of libstdc++ a `throw std::bad_alloc()` uses.
struct CxxRuntime {
    allocate: AllocateException,
    throw: Throw,
    type_info: *const c_void,
    /// The address a `std::bad_alloc` object's vtable pointer holds.
    vtable: *const c_void,
    destructor: Destructor,
}

// SAFETY: the fields are addresses of functions and read-only data in a
// library that is never unloaded; sharing them between threads is sound.
unsafe impl Send for CxxRuntime {}
// SAFETY: as for Send.
unsafe impl Sync for CxxRuntime {}

/// The size of a `std::bad_alloc`: only its vtable pointer.
const BAD_ALLOC_SIZE: usize = std::mem::size_of::<*const c_void>();

/// The Itanium ABI vtable layout: offset-to-top, then `type_info*`, then
/// the virtual functions the object's vtable pointer points at.
const VTABLE_PREFIX: usize = 2;

fn cxx_runtime() -> Option<&'static CxxRuntime> {
    static RUNTIME: OnceLock<Option<CxxRuntime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            // SAFETY: loading libstdc++ runs no initialisers beyond its own,
            // which are made for being loaded into any process.
            let lib = unsafe { libloading::Library::new("libstdc++.so.6") }.ok()?;
            // SAFETY: each name is the mangled libstdc++ symbol of the type
            // it is read as (Itanium C++ ABI).
            let runtime = unsafe {
                let allocate = *lib
                    .get::<AllocateException>(b"__cxa_allocate_exception\0")
                    .ok()?;
                let throw = *lib.get::<Throw>(b"__cxa_throw\0").ok()?;
                let type_info = *lib.get::<*const c_void>(b"_ZTISt9bad_alloc\0").ok()?;
                let vtable = *lib
                    .get::<*const *const c_void>(b"_ZTVSt9bad_alloc\0")
                    .ok()?;
                let destructor = *lib.get::<Destructor>(b"_ZNSt9bad_allocD1Ev\0").ok()?;
                CxxRuntime {
                    allocate,
                    throw,
                    type_info,
                    vtable: vtable.add(VTABLE_PREFIX).cast(),
                    destructor,
                }
            };
            // Kept loaded for the life of the process: the addresses above
            // point into it.
            std::mem::forget(lib);
            Some(runtime)
        })
        .as_ref()
}

/// Throws `std::bad_alloc` to the C++ code that called us, or returns when
/// no C++ runtime can be loaded (then the caller falls back to NULL).
///
/// # Safety
///
/// The caller must be an `extern "C-unwind"` function called directly by
/// C++ code that can take an exception here (PyTorch's allocator hook);
/// no Rust frame between it and this call may be inside `catch_unwind`.
///
/// ```no_run
/// use std::ffi::c_void;
/// /// An allocation hook C++ calls, which fails the C++ way.
/// extern "C-unwind" fn hook(_size: usize) -> *mut c_void {
///     // SAFETY: called by C++ code only, outside any `catch_unwind`.
///     unsafe { devmm::interop::throw_bad_alloc() };
///     std::ptr::null_mut()
/// }
/// # let _ = hook;
/// ```
pub unsafe fn throw_bad_alloc() {
    let Some(rt) = cxx_runtime() else {
        return;
    };
    // SAFETY: `__cxa_allocate_exception` returns storage for an object of
    // the size asked (it aborts rather than return NULL); a `bad_alloc` is
    // exactly its vtable pointer, so writing that constructs it, and
    // `__cxa_throw` takes ownership of it with its type and destructor.
    unsafe {
        let object = (rt.allocate)(BAD_ALLOC_SIZE);
        object.cast::<*const c_void>().write(rt.vtable);
        (rt.throw)(object, rt.type_info, rt.destructor)
    }
}
