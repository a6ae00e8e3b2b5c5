mod checks;
mod contract;
mod defaults;
mod parse_errors;
mod parts;
mod props;
mod settings_parts;
mod validate;
