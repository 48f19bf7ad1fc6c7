//! Why the relay could not start, or a new configuration was not taken.

use std::fmt;
use std::io;
use std::net::SocketAddr;

use crate::net::socket::PortInUse;

/// Why the relay could not start, or a new configuration was not taken.
#[derive(Debug)]
pub enum StartError {
    /// The listening socket could not be bound.
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Where it was configured.
        place: String,
        /// The OS error.
        source: io::Error,
    },
    /// A destination socket could not be set up.
    Destination {
        /// Its name.
        name: String,
        /// Its address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// An MQTT destination's publisher could not be started (no thread).
    Broker {
        /// Its name.
        name: String,
        /// Its broker, `mqtt://HOST:PORT`.
        broker: String,
        /// The OS error.
        source: io::Error,
    },
    /// A destination is this computer on the listen port: packets would loop.
    Loop {
        /// Its name.
        name: String,
        /// Its address.
        addr: SocketAddr,
    },
    /// The event loop could not be created.
    Poll(io::Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Listen {
                addr,
                place,
                source,
            } => write!(
                f,
                "{place}: cannot listen on {addr}: {}",
                PortInUse::new(*addr, source)
            ),
            StartError::Destination { name, addr, source } => {
                write!(
                    f,
                    "destination {name:?} ({addr}): cannot set up a socket: {source}"
                )
            }
            StartError::Broker {
                name,
                broker,
                source,
            } => write!(
                f,
                "destination {name:?} ({broker}): cannot start its MQTT publisher: {source}"
            ),
            StartError::Loop { name, addr } => write!(
                f,
                "destination {name:?} ({addr}) is this computer, on the port forza-relay \
                 listens on: packets would loop forever. Point it at the tool's own port."
            ),
            StartError::Poll(e) => write!(f, "cannot create the event loop: {e}"),
        }
    }
}

impl std::error::Error for StartError {}
