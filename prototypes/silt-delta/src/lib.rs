pub mod delta;
