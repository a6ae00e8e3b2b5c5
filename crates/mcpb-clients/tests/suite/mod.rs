mod render;
mod scopes;
