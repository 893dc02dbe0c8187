//! Events: which device they were created on and the stream they were last recorded on.

use std::ffi::c_int;

use crate::capture::CapturedEvent;
use crate::queue::Marker;

#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) device: c_int,
    /// The stream handle of the last `*EventRecord`, kept for the call log and for debugging.
    pub(crate) recorded_on: Option<usize>,
    /// The work the last record captured; waits on the event wait for it.
    pub(crate) marker: Option<Marker>,
    /// Set when the last record was on a capturing stream: the event stands for graph nodes.
    pub(crate) captured: Option<CapturedEvent>,
}
