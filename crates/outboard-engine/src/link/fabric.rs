//! TODO(owner: helper): see link/mod.rs contract.
//! TODO(owner: helper): see link/mod.rs contract.
use super::*;
pub struct FabricLink;
impl FabricLink { pub fn open(_iface: &str, _o: &LinkOptions) -> Result<FabricLink, LinkError> { Err(LinkError::BadSpec("fabric not built yet".into())) } }
impl Link for FabricLink {
    fn info(&self) -> LinkInfo { unreachable!() }
    fn mac(&self) -> [u8; 6] { unreachable!() }
    fn mtu(&self) -> usize { unreachable!() }
    fn receive(&mut self, _: usize, _: &mut dyn FnMut(&[u8])) -> Result<usize, LinkError> { unreachable!() }
    fn transmit(&mut self, _: &mut dyn FnMut(&mut [u8]) -> Option<usize>) -> Result<TxStatus, LinkError> { unreachable!() }
    fn flush(&mut self) -> Result<(), LinkError> { unreachable!() }
    fn wait(&mut self, _: Duration, _: &[RawFd]) -> Result<(), LinkError> { unreachable!() }
    fn counters(&self) -> LinkCounters { unreachable!() }
}
