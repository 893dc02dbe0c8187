use devmm::{memory_resource, DevicePtr, Ledger, Result};

#[derive(Debug, Default)]
struct Arena {
    ledger: Ledger,
}

#[memory_resource(alignment = 64, ledger = ledger)]
impl Arena {
    fn allocate(&self, _nbytes: usize) -> Result<DevicePtr> {
        Ok(DevicePtr::NULL)
    }
    unsafe fn deallocate(&self, _ptr: DevicePtr, _nbytes: usize) -> Result<()> {
        Ok(())
    }

    fn device(&self) -> &'static str {
        "cpu"
    }
}

fn main() {}
