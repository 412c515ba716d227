mod exec;
mod process;
mod support;
