//! The C functions of the engine as threads inside this process
//! (`ob_embedded_*`, declared in `include/outboard_embedded.h`), over the
//! helpers of liboutboard (`outboard-capi`, the crate `outboard`).

use crate::EmbeddedEngine;
use libc::{c_char, c_int};
use outboard::{c_str, ffi, handle_ref, ob_attach_options_t, ob_board_t, options_from_c, Errno, EINVAL};
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use outboard_engine::services::parse_services;
use std::net::Ipv4Addr;
use std::ptr;

/// An engine running as threads inside this process (from
/// `ob_embedded_start`; stopped and freed by `ob_embedded_stop`).
pub struct ob_engine_t {
    engine: EmbeddedEngine,
}

/// What `ob_embedded_start` needs; the strings are those of `outboard engine`'s flags.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ob_embedded_options_t {
    /// Engine name (`--name`): its threads' names, and with `control` the
    /// name `outboard stat --name` knows it by; NULL: "embedded".
    pub name: *const c_char,
    /// The link (`--link`): "fabric:NAME", "tap:NAME", "af_packet:IFACE" or "af_xdp:IFACE[:QUEUE]".
    pub link: *const c_char,
    /// The engine's address and prefix (`--addr`), e.g. "10.0.0.1/24".
    pub addr: *const c_char,
    /// Next hop for destinations outside the prefix (`--gateway`), e.g. "10.0.0.254"; NULL: none.
    pub gateway: *const c_char,
    /// Built-in services (`--services`), e.g. "echo,discard:9009"; NULL: none.
    pub services: *const c_char,
    /// IP MTU; 0: the link's.
    pub mtu: u32,
    /// Non-zero: bind the control socket (`RUN_DIR/NAME.sock`, for `outboard
    /// stat`); 0: none. Applications of other processes cannot attach to an
    /// embedded engine either way.
    pub control: c_int,
}

/// "A.B.C.D/N" → (address, prefix), as `outboard engine --addr` takes it.
fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), Errno> {
    outboard_engine::engine::parse_ipv4_cidr(s).map_err(|_| EINVAL)
}

unsafe fn settings(o: &ob_embedded_options_t) -> Result<EngineSettings, Errno> {
    let name = if o.name.is_null() { "embedded" } else { c_str(o.name)? };
    let link: LinkSpec = c_str(o.link)?.parse().map_err(|_| EINVAL)?;
    let (addr, prefix) = parse_cidr(c_str(o.addr)?)?;
    let mut s = EngineSettings::new(name, link, addr, prefix);
    if !o.gateway.is_null() {
        s.gateway = Some(c_str(o.gateway)?.parse().map_err(|_| EINVAL)?);
    }
    s.services = if o.services.is_null() { Vec::new() } else { parse_services(c_str(o.services)?).map_err(|_| EINVAL)? };
    if o.mtu != 0 {
        s.mtu = Some(o.mtu as usize);
    }
    s.control = o.control != 0;
    Ok(s)
}

/// Starts an engine as threads in this process. Returns NULL with errno on
/// failure (EINVAL: a malformed option).
#[no_mangle]
pub unsafe extern "C" fn ob_embedded_start(opts: *const ob_embedded_options_t) -> *mut ob_engine_t {
    ffi(ptr::null_mut(), || {
        let settings = settings(handle_ref(opts)?)?;
        let engine = EmbeddedEngine::start(settings)?;
        Ok(Box::into_raw(Box::new(ob_engine_t { engine })))
    })
}

/// Attaches a board to the embedded engine (`opts` NULL: the defaults).
/// Returns NULL with errno on failure. Free the board with `ob_detach`.
#[no_mangle]
pub unsafe extern "C" fn ob_embedded_attach(engine: *const ob_engine_t, opts: *const ob_attach_options_t) -> *mut ob_board_t {
    ffi(ptr::null_mut(), || {
        let e = handle_ref(engine)?;
        let board = e.engine.attach(&options_from_c(opts)?)?;
        Ok(Box::into_raw(Box::new(ob_board_t::new(board))))
    })
}

/// Stops the engine threads (boards still attached then get ESHUTDOWN) and
/// frees the handle. Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_embedded_stop(engine: *mut ob_engine_t) -> c_int {
    ffi(-1, || {
        if engine.is_null() {
            return Err(EINVAL);
        }
        let ob_engine_t { engine } = *Box::from_raw(engine);
        engine.stop();
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parses_like_the_cli() {
        assert_eq!(parse_cidr("10.0.0.1/24").ok(), Some((Ipv4Addr::new(10, 0, 0, 1), 24)));
        for bad in ["10.0.0.1", "10.0.0.1/0", "10.0.0.1/33", "0.0.0.0/8", "x/24"] {
            assert!(parse_cidr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_embedded_options_give_einval() {
        let o = ob_embedded_options_t {
            name: c"t".as_ptr(),
            link: c"nonsense".as_ptr(),
            addr: c"10.0.0.1/24".as_ptr(),
            gateway: ptr::null(),
            services: ptr::null(),
            mtu: 0,
            control: 0,
        };
        unsafe {
            assert!(ob_embedded_start(&o).is_null());
            assert_eq!(*libc::__errno_location(), libc::EINVAL);
            let o2 = ob_embedded_options_t { link: c"fabric:x".as_ptr(), addr: c"10.0.0.1".as_ptr(), ..o };
            assert!(ob_embedded_start(&o2).is_null());
            assert_eq!(*libc::__errno_location(), libc::EINVAL);
        }
    }
}
