mod bad_input;
mod daemon;
mod interop;
mod session;
mod support;
