//! The full signatures, a stream-ordered device resource, a written
//! `available_memory`, and bookkeeping forced on with `debug = true`.

use devmm::{memory_resource, Device, DevicePtr, Ledger, MemoryInfo, MemoryResource, Result, Stream};

#[derive(Debug, Default)]
pub struct Queue {
    ledger: Ledger,
}

#[memory_resource(device = "cuda:1", alignment = 256, stream_ordered = true, ledger = ledger, debug = true)]
impl Queue {
    pub fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let _ = (nbytes, stream);
        Ok(DevicePtr::from_addr(0x1000))
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        let _ = (ptr, nbytes, stream);
        Ok(())
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        Ok(MemoryInfo { free: 1, total: 2 })
    }
}

fn main() {
    let mr = Queue::default();
    assert_eq!(mr.device(), Device::cuda(1));
    assert_eq!(mr.guaranteed_alignment(), 256);
    assert!(mr.stream_ordered() && mr.detects_misuse());
    assert_eq!(mr.available_memory().unwrap(), MemoryInfo { free: 1, total: 2 });
    let p = mr.allocate(8, &Stream::cpu()).unwrap();
    assert_eq!(mr.live_count(), Some(1));
    // SAFETY: p is live with 8 bytes.
    unsafe { mr.deallocate(p, 8, &Stream::cpu()).unwrap() };
    assert_eq!(mr.live_count(), Some(0));
}
