//! The replies of the session scripts, typed: each script answers with a tag and the
//! fields that tag carries (scripts/*.lua say which), decoded here once into an enum
//! instead of being read by position where they are used.

use redis::{FromRedisValue, ParsingError, Value};

/// A script's reply: its tag, then its fields.
struct Reply(Vec<Value>);

impl Reply {
    fn new(value: Value) -> Result<(String, Self), ParsingError> {
        let reply = Self(Vec::<Value>::from_redis_value(value)?);
        Ok((reply.get(0)?, reply))
    }

    /// Field `at` (the tag is field 0); a missing one reads as nil.
    fn get<T: FromRedisValue>(&self, at: usize) -> Result<T, ParsingError> {
        redis::from_redis_value_ref(self.0.get(at).unwrap_or(&Value::Nil))
    }

    /// Field `at`, an event's sequence number.
    fn seq(&self, at: usize) -> Result<u64, ParsingError> {
        let text: String = self.get(at)?;
        text.parse()
            .map_err(|_| ParsingError::from(format!("bad sequence number {text:?}")))
    }
}

fn unexpected(script: &str, tag: &str) -> ParsingError {
    ParsingError::from(format!("unexpected reply of the {script} script: {tag:?}"))
}

/// Why REGISTER refused an ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The session holds its most pending asks.
    SessionFull,
    /// The tenant holds its most pending asks.
    TenantFull,
    /// The session's pending asks hold their most bytes.
    SessionBytesFull,
    /// The tenant's pending asks hold their most bytes.
    TenantBytesFull,
    /// The tenant has its most sessions.
    SessionsFull,
    /// Nobody follows the session and the ask must be attended (Semantics 8).
    NoProvider,
    /// The request_id names another ask (REQUEST_ID_REUSED).
    RequestIdReused,
}

impl Refusal {
    /// The refusal a reply's tag names, if it names one.
    pub fn of(tag: &str) -> Option<Self> {
        Some(match tag {
            "full" => Self::SessionFull,
            "tenant_full" => Self::TenantFull,
            "session_bytes_full" => Self::SessionBytesFull,
            "tenant_bytes_full" => Self::TenantBytesFull,
            "sessions_full" => Self::SessionsFull,
            "no_provider" => Self::NoProvider,
            "reused" => Self::RequestIdReused,
            _ => return None,
        })
    }
}

/// What REGISTER did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterReply {
    /// Stored as event `seq` of the session's `epoch`; on a cluster, with the
    /// session's mark of the tenant's held sessions (the tenant's part follows).
    New {
        seq: u64,
        epoch: String,
        held: Option<String>,
    },
    /// The request_id names an ask still pending: this one; on a cluster with its
    /// event, for the node to announce it to the tenant again.
    Joined {
        rpc_id: String,
        event: Option<PendingEvent>,
    },
    /// The request_id names an ask resolved already: its encoded `Resolved`.
    Recorded {
        rpc_id: String,
        resolved: Vec<u8>,
    },
    Refused(Refusal),
}

/// A pending ask's `requested` event, as a retry on a cluster finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    pub seq: u64,
    pub epoch: String,
    /// The encoded `Requested`.
    pub requested: Vec<u8>,
    /// The session shard's clock now.
    pub time_us: String,
}

impl FromRedisValue for RegisterReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let (tag, reply) = Reply::new(value)?;
        Ok(match tag.as_str() {
            "new" => Self::New {
                seq: reply.seq(1)?,
                epoch: reply.get(2)?,
                held: reply.get(3)?,
            },
            "joined" => Self::Joined {
                rpc_id: reply.get(1)?,
                event: match reply.get::<Option<String>>(3)? {
                    None => None,
                    Some(epoch) => Some(PendingEvent {
                        seq: reply.seq(2)?,
                        epoch,
                        requested: reply.get(4)?,
                        time_us: reply.get(5)?,
                    }),
                },
            },
            "recorded" => Self::Recorded {
                rpc_id: reply.get(1)?,
                resolved: reply.get(2)?,
            },
            other => {
                Self::Refused(Refusal::of(other).ok_or_else(|| unexpected("register", other))?)
            }
        })
    }
}

/// What CLAIM did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimReply {
    /// This claim won: event `seq` of `epoch`, with the ask's encoded `Requested`;
    /// on a cluster, whether the session still has pending asks and its mark of the
    /// tenant's held sessions (the tenant's part follows).
    Won {
        seq: u64,
        epoch: String,
        asked: Vec<u8>,
        session_left: Option<String>,
        held: Option<String>,
        /// Bytes of the outcome recorded for retries (0: none), which count against
        /// the tenant's budget until it expires.
        outcome_bytes: u64,
    },
    /// The ask is not pending: how it was settled (`<RESOLUTION> <resolved_by>`),
    /// while the store remembers.
    Gone { settled: String },
}

impl FromRedisValue for ClaimReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let (tag, reply) = Reply::new(value)?;
        match tag.as_str() {
            "claimed" => Ok(Self::Won {
                seq: reply.seq(1)?,
                epoch: reply.get(2)?,
                session_left: reply.get(3)?,
                held: reply.get(4)?,
                asked: reply.get(5)?,
                outcome_bytes: reply.get::<Option<u64>>(6)?.unwrap_or(0),
            }),
            "gone" => Ok(Self::Gone {
                settled: reply.get(1)?,
            }),
            other => Err(unexpected("claim", other)),
        }
    }
}

/// What NOTICE did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeReply {
    /// Appended as event `seq` of `epoch` (`first`), or found appended before by a
    /// node that died before it recorded so (not `first`: not again on the stream);
    /// with the ask's encoded `Requested`.
    Sent {
        first: bool,
        seq: u64,
        epoch: String,
        asked: Vec<u8>,
    },
    /// The ask is no longer pending.
    Gone,
}

impl FromRedisValue for NoticeReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let (tag, reply) = Reply::new(value)?;
        let first = match tag.as_str() {
            "sent" => true,
            "again" => false,
            _ => return Ok(Self::Gone),
        };
        Ok(Self::Sent {
            first,
            seq: reply.seq(1)?,
            epoch: reply.get(2)?,
            asked: reply.get(3)?,
        })
    }
}

/// What ABORT_REQUEST did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortReply {
    /// The request's ask is pending: its rpc_id (the caller claims it).
    Pending(String),
    /// The request's ask was resolved already.
    Ended,
    /// No ask yet: the outcome is recorded for the request.
    Recorded,
}

impl FromRedisValue for AbortReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let (tag, reply) = Reply::new(value)?;
        match tag.as_str() {
            "pending" => Ok(Self::Pending(reply.get(1)?)),
            "ended" => Ok(Self::Ended),
            "recorded" => Ok(Self::Recorded),
            other => Err(unexpected("abort_request", other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(fields: &[&str]) -> Value {
        Value::Array(
            fields
                .iter()
                .map(|f| Value::BulkString(f.as_bytes().to_vec()))
                .collect(),
        )
    }

    #[test]
    fn each_tag_becomes_its_variant_with_its_fields() {
        assert_eq!(
            RegisterReply::from_redis_value(reply(&["new", "7", "e1"])).expect("new"),
            RegisterReply::New {
                seq: 7,
                epoch: "e1".into(),
                held: None
            }
        );
        assert_eq!(
            RegisterReply::from_redis_value(reply(&["no_provider"])).expect("refused"),
            RegisterReply::Refused(Refusal::NoProvider)
        );
        assert_eq!(
            ClaimReply::from_redis_value(reply(&["gone", "ANSWERED ana"])).expect("gone"),
            ClaimReply::Gone {
                settled: "ANSWERED ana".into()
            }
        );
        assert_eq!(
            AbortReply::from_redis_value(reply(&["pending", "r1"])).expect("pending"),
            AbortReply::Pending("r1".into())
        );
    }

    #[test]
    fn an_unknown_tag_or_a_bad_field_is_an_error_naming_it() {
        let err = RegisterReply::from_redis_value(reply(&["what"])).expect_err("unknown");
        assert!(err.to_string().contains("\"what\""), "{err}");
        let err = ClaimReply::from_redis_value(reply(&["claimed", "x", "e"])).expect_err("bad seq");
        assert!(err.to_string().contains("bad sequence number"), "{err}");
        assert!(AbortReply::from_redis_value(Value::Nil).is_err());
    }
}
