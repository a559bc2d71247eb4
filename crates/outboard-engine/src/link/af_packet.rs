//! TODO(owner: helper): see link/mod.rs contract.
use super::*;
pub struct AfPacketLink;
impl AfPacketLink { pub fn open(_iface: &str, _o: &LinkOptions) -> Result<AfPacketLink, LinkError> { Err(LinkError::BadSpec("af_packet not built yet".into())) } }
impl Link for AfPacketLink {
    fn info(&self) -> LinkInfo { unreachable!() }
    fn mac(&self) -> [u8; 6] { unreachable!() }
    fn mtu(&self) -> usize { unreachable!() }
    fn receive(&mut self, _: usize, _: &mut dyn FnMut(&[u8])) -> Result<usize, LinkError> { unreachable!() }
    fn transmit(&mut self, _: &mut dyn FnMut(&mut [u8]) -> Option<usize>) -> Result<TxStatus, LinkError> { unreachable!() }
    fn flush(&mut self) -> Result<(), LinkError> { unreachable!() }
    fn wait(&mut self, _: Duration, _: &[RawFd]) -> Result<(), LinkError> { unreachable!() }
    fn counters(&self) -> LinkCounters { unreachable!() }
}
