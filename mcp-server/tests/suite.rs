mod conformance;
mod fleet;
mod http;
mod lifecycle;
mod stdio;
mod support;
