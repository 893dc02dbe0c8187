//! A generated resource is named in its chain by its type, with its device
//! and alignment as the shipped resources are, not by its derived `Debug`;
//! `name = ".."` overrides the type's name.

use devmm::{memory_resource, resource_chain, DevicePtr, Ledger, Result, StatisticsAdaptor};

#[derive(Debug, Default)]
struct Zeroed {
    ledger: Ledger,
}

#[memory_resource(device = "cpu", alignment = 64, ledger = ledger)]
impl Zeroed {
    fn allocate(&self, _nbytes: usize) -> Result<DevicePtr> {
        Ok(DevicePtr::NULL)
    }

    unsafe fn deallocate(&self, _ptr: DevicePtr, _nbytes: usize) -> Result<()> {
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Arena {
    ledger: Ledger,
}

#[memory_resource(device = "cuda:1", alignment = 256, ledger = ledger, name = "GpuArena")]
impl Arena {
    fn allocate(&self, _nbytes: usize) -> Result<DevicePtr> {
        Ok(DevicePtr::NULL)
    }

    unsafe fn deallocate(&self, _ptr: DevicePtr, _nbytes: usize) -> Result<()> {
        Ok(())
    }
}

fn main() {
    assert_eq!(resource_chain(&Zeroed::default()), "Zeroed(device=cpu:0, alignment=64)");
    assert_eq!(
        resource_chain(&StatisticsAdaptor::new(Zeroed::default())),
        "StatisticsAdaptor -> Zeroed(device=cpu:0, alignment=64)"
    );
    assert_eq!(resource_chain(&Arena::default()), "GpuArena(device=cuda:1, alignment=256)");
    // `Debug` stays the user's own.
    assert!(format!("{:?}", Zeroed::default()).starts_with("Zeroed { ledger"));
}
