//! Pure rules of askgate: request validation, answer validation and normalisation,
//! the domain error, and the values the backends store. No tonic, no storage, no I/O.

pub mod answer;
pub mod approval;
pub mod connect;
pub mod error;
pub mod limits;
pub mod model;
pub mod people;
pub mod policy_set;
pub mod quorum;
mod seen;
pub mod shown;
pub mod status;
pub mod validate;

pub use error::{Echo, Error, Settled, Violation, bounded, echo};
pub use limits::Limits;
pub use model::{Answered, DEFAULT_TENANT, Fingerprint, NewAsk, Outcome, Resolver, SessionKey};
