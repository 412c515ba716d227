mod http;
mod stdio;
mod support;
