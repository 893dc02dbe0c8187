//! A memory pool's figures: plain numbers, below the error type that
//! reports them with an out-of-memory failure and the resources that
//! answer them.

/// The figures of a memory pool, as its driver keeps them
/// (`cudaMemPoolGetAttribute`): what it has reserved from the device and
/// how much of that its live blocks use, each with its high-water mark.
///
/// ```
/// use devmm::PoolStatistics;
/// let figures = PoolStatistics {
///     reserved_bytes: 192 << 20,
///     reserved_high_bytes: 192 << 20,
///     used_bytes: 128 << 20,
///     used_high_bytes: 192 << 20,
/// };
/// assert_eq!(figures.fragmentation_bytes(), 64 << 20);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStatistics {
    /// Device memory the pool holds now, used or not.
    pub reserved_bytes: u64,
    /// The most it held since it was made or its marks were reset.
    pub reserved_high_bytes: u64,
    /// Bytes of live blocks (freed blocks count until their free is reached on its stream).
    pub used_bytes: u64,
    /// The most its blocks used since it was made or its marks were reset.
    pub used_high_bytes: u64,
}

impl PoolStatistics {
    /// Reserved memory no block uses: what the pool keeps for reuse, and
    /// what it could give back (`trim`).
    pub fn fragmentation_bytes(&self) -> u64 {
        self.reserved_bytes.saturating_sub(self.used_bytes)
    }
}
