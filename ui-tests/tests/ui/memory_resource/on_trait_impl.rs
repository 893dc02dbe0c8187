use devmm::{memory_resource, Device, DevicePtr, MemoryInfo, MemoryResource, Result, Stream};

#[derive(Debug)]
struct Arena;

#[memory_resource(device = "cpu", alignment = 64, debug = false)]
impl MemoryResource for Arena {
    fn allocate(&self, _nbytes: usize, _stream: &Stream) -> Result<DevicePtr> {
        Ok(DevicePtr::NULL)
    }

    unsafe fn deallocate(&self, _ptr: DevicePtr, _nbytes: usize, _stream: &Stream) -> Result<()> {
        Ok(())
    }

    fn device(&self) -> Device {
        Device::CPU
    }

    fn guaranteed_alignment(&self) -> usize {
        64
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        Ok(MemoryInfo { free: 0, total: 0 })
    }
}

fn main() {}
