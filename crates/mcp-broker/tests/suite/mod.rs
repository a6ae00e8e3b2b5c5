mod bad_input;
mod daemon;
mod faults;
mod interop;
mod session;
mod support;
