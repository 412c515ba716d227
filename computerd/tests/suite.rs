mod exec;
mod files;
mod isolate;
mod lifecycle;
mod process;
mod sandbox;
mod sandbox_view;
mod support;
