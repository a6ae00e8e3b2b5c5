mod contract;
mod defaults;
mod props;
mod validate;
