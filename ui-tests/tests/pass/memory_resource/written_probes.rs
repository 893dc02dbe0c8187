//! Probes written as methods instead of attribute keys, a ledger in a tuple
//! field, and every other item of the impl block kept as it was.

use devmm::{memory_resource, Device, DeviceType, DevicePtr, Ledger, MemoryResource, Result};

#[derive(Debug)]
struct OnDevice(Device, Ledger);

#[memory_resource(ledger = 1)]
impl OnDevice {
    const ALIGNMENT: usize = 128;

    fn new(device: Device) -> Self {
        OnDevice(device, Ledger::new())
    }

    fn allocate(&self, _nbytes: usize) -> Result<DevicePtr> {
        Ok(DevicePtr::from_addr(Self::ALIGNMENT * 4))
    }

    unsafe fn deallocate(&self, _ptr: DevicePtr, _nbytes: usize) -> Result<()> {
        Ok(())
    }

    fn device(&self) -> Device {
        self.0
    }

    fn guaranteed_alignment(&self) -> usize {
        Self::ALIGNMENT
    }
}

fn main() {
    let mr = OnDevice::new(Device::new(DeviceType::Rocm, 2));
    assert_eq!(mr.device().to_string(), "rocm:2");
    assert_eq!(mr.guaranteed_alignment(), 128);
    assert!(!mr.stream_ordered());
    assert_eq!(mr.detects_misuse(), cfg!(debug_assertions));
}
