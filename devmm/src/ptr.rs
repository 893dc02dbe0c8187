//! Device addresses.

use std::fmt;

/// An address in some device's memory.
///
/// Not a host pointer: a CUDA address means nothing to the CPU, so devmm never
/// hands one out as `*mut u8`. [`DevicePtr::as_host_ptr`] exists for memory
/// whose device is host-accessible, and says so in its name.
///
/// ```
/// use devmm::DevicePtr;
/// let p = DevicePtr::from_addr(0x1000);
/// assert_eq!(p.offset(0x40).unwrap().addr(), 0x1040);
/// assert!(p.is_aligned(256));
/// assert!(DevicePtr::NULL.is_null());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct DevicePtr(usize);

impl DevicePtr {
    /// The null address: what zero-byte allocations return.
    pub const NULL: DevicePtr = DevicePtr(0);

    /// Wraps a raw address.
    pub const fn from_addr(addr: usize) -> DevicePtr {
        DevicePtr(addr)
    }

    /// Wraps a host pointer (for host-accessible memory).
    ///
    /// ```
    /// let mut x = 0u8;
    /// let p = devmm::DevicePtr::from_host_ptr(&mut x);
    /// assert_eq!(p.addr(), &x as *const u8 as usize);
    /// ```
    pub fn from_host_ptr<T>(ptr: *mut T) -> DevicePtr {
        DevicePtr(ptr as usize)
    }

    /// The raw address.
    pub const fn addr(self) -> usize {
        self.0
    }

    /// Whether this is the null address.
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }

    /// The address `bytes` further on, or `None` on overflow.
    pub const fn offset(self, bytes: usize) -> Option<DevicePtr> {
        match self.0.checked_add(bytes) {
            Some(addr) => Some(DevicePtr(addr)),
            None => None,
        }
    }

    /// Whether the address is a multiple of `align` (a power of two).
    pub const fn is_aligned(self, align: usize) -> bool {
        self.0 & (align.wrapping_sub(1)) == 0
    }

    /// The address as a host pointer.
    ///
    /// Dereferencing it is only meaningful when the memory's device is
    /// host-accessible ([`DeviceType::is_host_accessible`](crate::DeviceType::is_host_accessible)).
    pub const fn as_host_ptr<T>(self) -> *mut T {
        self.0 as *mut T
    }
}

impl fmt::Debug for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DevicePtr({:#x})", self.0)
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
