mod contract;
mod validate;
