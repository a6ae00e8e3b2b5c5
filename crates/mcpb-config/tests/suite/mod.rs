mod contract;
mod props;
mod validate;
