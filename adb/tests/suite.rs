mod fake;
mod host;
mod server;
mod support;
