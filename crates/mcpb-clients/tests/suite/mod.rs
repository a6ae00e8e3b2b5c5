mod render;
