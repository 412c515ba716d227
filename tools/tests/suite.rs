mod bad_input;
mod computer;
mod exec;
mod files;
mod process;
mod support;
