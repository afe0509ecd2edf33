#![warn(missing_docs)]
