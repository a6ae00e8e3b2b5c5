mod bad_input;
mod daemon;
mod faults;
mod interop;
mod lifecycle;
mod routing;
mod session;
mod support;
