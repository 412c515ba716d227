mod exec;
mod files;
mod lifecycle;
mod process;
mod support;
