mod bad_input;
mod browser;
mod computer;
mod exec;
mod files;
mod process;
mod support;
