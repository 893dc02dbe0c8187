//! `enable_statistics` changes the process-wide resource, so it runs in a
//! test binary of its own.

use devmm::statistics::{enable_statistics, get_statistics, statistics};
use devmm::{Device, DeviceBuffer, get_current_memory_resource};

#[test]
fn enable_wraps_the_current_resource_once_and_scopes_stack_on_it() {
    let before = get_current_memory_resource(Device::CPU).unwrap();
    assert!(get_statistics(Device::CPU).unwrap().is_none());
    let stats = enable_statistics(Device::CPU).unwrap();
    assert!(std::sync::Arc::ptr_eq(
        &stats,
        &enable_statistics(Device::CPU).unwrap()
    ));
    assert_eq!(
        devmm::resource_chain(&*get_current_memory_resource(Device::CPU).unwrap()),
        format!("StatisticsAdaptor -> {}", devmm::resource_chain(&*before))
    );
    let a = DeviceBuffer::on_device(10, Device::CPU).unwrap();
    {
        let _scope = statistics(Device::CPU).unwrap();
        let _b = DeviceBuffer::on_device(5, Device::CPU).unwrap();
        assert_eq!(
            get_statistics(Device::CPU).unwrap().unwrap().current_bytes,
            5
        );
    }
    let global = get_statistics(Device::CPU).unwrap().unwrap();
    assert_eq!(
        (global.current_bytes, global.peak_bytes, global.total_bytes),
        (10, 15, 15)
    );
    drop(a);
}
