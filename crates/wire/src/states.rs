//! The states a bisect, a commit's verdict and a task's phase can be in, as enums with the
//! text stored in the database and sent in the API (`as_str` and `FromStr` agree).

use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// A text that names none of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a {what}")]
pub struct UnknownState {
    pub what: &'static str,
    pub text: String,
}

macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident, $what:literal, { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl FromStr for $name {
            type Err = UnknownState;
            fn from_str(s: &str) -> Result<Self, UnknownState> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownState { what: $what, text: s.to_string() }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[cfg(feature = "sqlx")]
        sqlx_text!($name);
    };
}

/// Stored as `text` (the columns stay text, with CHECK constraints listing the same strings),
/// so the enums are read and bound like `&str` and parsed on the way out: a value the enum
/// does not know is a decode error naming it, not a silent default.
#[cfg(feature = "sqlx")]
macro_rules! sqlx_text {
    ($name:ident) => {
        impl sqlx::Type<sqlx::Postgres> for $name {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::Type<sqlx::Postgres>>::type_info()
            }
            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <&str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        impl sqlx::postgres::PgHasArrayType for $name {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::postgres::PgHasArrayType>::array_type_info()
            }
        }

        impl sqlx::Encode<'_, sqlx::Postgres> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<sqlx::Postgres>>::encode(self.as_str(), buf)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $name {
            fn decode(
                value: sqlx::postgres::PgValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                let text = <&str as sqlx::Decode<sqlx::Postgres>>::decode(value)?;
                Ok(text.parse::<$name>()?)
            }
        }
    };
}

/// For enums defined elsewhere in the crate with `as_str` and `FromStr`.
#[cfg(feature = "sqlx")]
pub(crate) use sqlx_text;

text_enum!(
    /// Where a bisect is: (`fetching →`) `queued → reproducing → searching → verifying →`
    /// one final status. `fetching` waits for its repository's fetch, before its range exists.
    BisectStatus, "bisect status", {
        Fetching => "fetching",
        Queued => "queued",
        Reproducing => "reproducing",
        Searching => "searching",
        Verifying => "verifying",
        Found => "found",
        NotReproduced => "not_reproduced",
        Inconclusive => "inconclusive",
        Failed => "failed",
        Cancelled => "cancelled",
    }
);

impl BisectStatus {
    /// The statuses of a bisect still being worked on. (A `fetching` one has no range yet, so
    /// it takes no hosts: the scheduler's `store::SCHEDULED` leaves it out.)
    pub const ACTIVE: &'static [BisectStatus] = &[
        BisectStatus::Fetching,
        BisectStatus::Queued,
        BisectStatus::Reproducing,
        BisectStatus::Searching,
        BisectStatus::Verifying,
    ];

    pub fn is_final(self) -> bool {
        !Self::ACTIVE.contains(&self)
    }
}

text_enum!(
    /// The engine's verdict on one commit.
    Verdict, "verdict", {
        Good => "good",
        Bad => "bad",
        Unknown => "unknown",
        Skipped => "skipped",
    }
);

text_enum!(
    /// What a task measures for: the endpoints, the search, or the culprit against its parent
    /// (a bisect's tasks), or a watched branch's commit (a watch's tasks).
    Phase, "phase", {
        Reproducing => "reproducing",
        Searching => "searching",
        Verifying => "verifying",
        Watch => "watch",
    }
);

text_enum!(
    /// Where a task is in the queue: waiting, held by a host under a lease, or ended.
    TaskState, "task state", {
        Queued => "queued",
        Running => "running",
        Done => "done",
        BuildFailed => "build_failed",
        Failed => "failed",
        Cancelled => "cancelled",
    }
);

text_enum!(
    /// A registered repository's mirror: its first fetch under way, mirrored, or never
    /// mirrored because that fetch failed.
    RepoState, "repository state", {
        Mirroring => "mirroring",
        Ready => "ready",
        Failed => "failed",
    }
);

text_enum!(
    /// The kind of an API token (`api_tokens.kind`): the role it grants. `api` is the
    /// submitter's role; `enroll` only registers workers.
    TokenKind, "token kind", {
        Reader => "reader",
        Api => "api",
        Operator => "operator",
        Enroll => "enroll",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_round_trip_and_agree_with_the_api_list() {
        for s in BisectStatus::ALL {
            assert_eq!(s.as_str().parse::<BisectStatus>(), Ok(*s));
            assert!(crate::api::STATUSES.contains(&s.as_str()));
            assert_eq!(s.is_final(), crate::api::status_is_final(s.as_str()));
        }
        assert_eq!(BisectStatus::ALL.len(), crate::api::STATUSES.len());
        for v in Verdict::ALL {
            assert_eq!(v.as_str().parse::<Verdict>(), Ok(*v));
        }
        for p in Phase::ALL {
            assert_eq!(p.as_str().parse::<Phase>(), Ok(*p));
        }
        for t in TaskState::ALL {
            assert_eq!(t.as_str().parse::<TaskState>(), Ok(*t));
        }
        for r in RepoState::ALL {
            assert_eq!(r.as_str().parse::<RepoState>(), Ok(*r));
        }
        for k in TokenKind::ALL {
            assert_eq!(k.as_str().parse::<TokenKind>(), Ok(*k));
        }
        let err = "done".parse::<Verdict>().unwrap_err();
        assert_eq!(err.to_string(), "`done` is not a verdict");
    }
}
