mod conformance;
mod desktop;
mod fleet;
mod http;
mod lifecycle;
mod skills;
mod stdio;
mod support;
