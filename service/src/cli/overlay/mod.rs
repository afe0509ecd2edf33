//! The interactive answering overlay of `askgate answer`. Its behaviour is pure and
//! tested without a terminal: [`state`] is one batch (drafts, cursor, what each key
//! does), [`queue`] the batches waiting for this terminal and the subscription's
//! events, [`view`] draws them (tested on ratatui's `TestBackend`). [`run`] puts them
//! on a terminal; [`lines`] is the same as line prompts, without one.

pub mod lines;
pub mod queue;
pub mod run;
pub mod state;
pub mod view;
