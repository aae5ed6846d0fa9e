//! Errors: one enum variant per kind of failure (docs/api.md, "Errors").
//!
//! Every call returns [`Error`] (never a bare `tonic::Status`). Match on the
//! variant to react: `Err(Error::NotFound(_))`, `Err(e) if e.is_retryable_transaction()`.
//! [`ErrorInfo`] carries the gRPC code (None when the client refused the call
//! before sending it), the server's message, and the client operation.
//!
//! | variant | gRPC code | what to do |
//! |---|---|---|
//! | `InvalidArgument` | INVALID_ARGUMENT | fix the request |
//! | `NotFound` | NOT_FOUND | key, subvolume, file or handle absent |
//! | `AlreadyExists` | ALREADY_EXISTS | name taken |
//! | `FailedPrecondition` | FAILED_PRECONDITION | do not retry until something changes |
//! | `ReadOnly` | FAILED_PRECONDITION (EROFS, "read-only") | write to a read-only snapshot or store |
//! | `Conflict` | ABORTED | retry the whole transaction |
//! | `TooOld` | OUT_OF_RANGE | retry the whole transaction |
//! | `Compacted` | OUT_OF_RANGE, reason COMPACTED (watch: WATCH_CANCEL_COMPACTED) | a read or a watcher's start at a compacted revision: go on from `compact_revision` |
//! | `FutureRevision` | OUT_OF_RANGE, reason FUTURE_REVISION | a read at a revision not reached yet (not retried) |
//! | `SubvolumeDeleted` | — (watch: WATCH_CANCEL_SUBVOLUME_DELETED) | the watched subvolume was deleted |
//! | `SlowReader` | — (watch: WATCH_CANCEL_SLOW_READER) | the watcher was read too slowly: restart after the last event read |
//! | `ResourceExhausted` | RESOURCE_EXHAUSTED | a server limit |
//! | `NoSpace` | RESOURCE_EXHAUSTED (ENOSPC, "no space") | the device is full |
//! | `DataLoss` | DATA_LOSS | a checksum failed: run `Client::check` |
//! | `Unavailable` | UNAVAILABLE | server stopping or unreachable: retry the call |
//! | `Unauthenticated` | UNAUTHENTICATED | token missing or wrong |
//! | `PermissionDenied` | PERMISSION_DENIED | |
//! | `DeadlineExceeded` | DEADLINE_EXCEEDED | the call's deadline passed |
//! | `Cancelled` | CANCELLED | |
//! | `Unimplemented` | UNIMPLEMENTED | server too old for this call |
//! | `Internal` | INTERNAL, UNKNOWN | device I/O error, malformed message |
//! | `Transport` | — | the endpoint could not be set up (bad address, TLS files) |
//! | `User` | — | an error returned by your own transaction body |
//!
//! The variant comes from the `google.rpc.ErrorInfo` the server sends with
//! every error ([`ErrorInfo::reason`], [`ErrorInfo::metadata`]): the reasons
//! `READ_ONLY_SNAPSHOT` and `EROFS` give `ReadOnly`, `ENOSPC` `NoSpace`,
//! `CONFLICT` `Conflict`, `TOO_OLD` `TooOld`, `COMPACTED` `Compacted`,
//! `FUTURE_REVISION` `FutureRevision`; any other reason keeps the code's
//! variant. Only for a server that sends no ErrorInfo (older than the
//! reasons) is the message text read (EROFS/"read-only", ENOSPC/"no space").
//! These tables (classes, code -> class, reason -> class, retry rule, text
//! fallbacks) come from clients/spec/errors.json through the generated
//! [`crate::spec`].

use std::collections::HashMap;
use std::fmt;

use tonic::Code;

use crate::spec::{self, Class};

/// What every error variant carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorInfo {
    /// The gRPC status code; None when the client refused the call itself.
    pub code: Option<Code>,
    /// The server's (or the client's) message, without the operation.
    pub message: String,
    /// The client operation that failed ("put", "mkdir", ...).
    pub operation: &'static str,
    /// The server's `google.rpc.ErrorInfo` reason ("ENOENT",
    /// "READ_ONLY_SNAPSHOT", "CONFLICT", ...; docs/api.md "Errors"); empty
    /// from a server that sends none and for the client's own checks.
    pub reason: String,
    /// The ErrorInfo's metadata: "errno" for Files errors,
    /// "compact_revision" for COMPACTED.
    pub metadata: HashMap<String, String>,
}

impl ErrorInfo {
    fn new(code: Option<Code>, message: impl Into<String>, operation: &'static str) -> Self {
        ErrorInfo { code, message: message.into(), operation, ..Default::default() }
    }
}

/// google.rpc.Status, google.protobuf.Any and google.rpc.ErrorInfo: the
/// fields the client reads of the grpc-status-details-bin trailer.
mod rpc_status {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        #[prost(int32, tag = "1")]
        pub code: i32,
        #[prost(string, tag = "2")]
        pub message: String,
        #[prost(message, repeated, tag = "3")]
        pub details: Vec<Any>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Any {
        #[prost(string, tag = "1")]
        pub type_url: String,
        #[prost(bytes = "vec", tag = "2")]
        pub value: Vec<u8>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ErrorInfo {
        #[prost(string, tag = "1")]
        pub reason: String,
        #[prost(string, tag = "2")]
        pub domain: String,
        #[prost(map = "string, string", tag = "3")]
        pub metadata: HashMap<String, String>,
    }
}

/// The google.rpc.ErrorInfo in a status's details (the
/// grpc-status-details-bin trailer): (reason, metadata), or None when the
/// server sent none or it does not parse.
fn error_info_of(status: &tonic::Status) -> Option<(String, HashMap<String, String>)> {
    use prost::Message;
    let st = rpc_status::Status::decode(status.details()).ok()?;
    let any = st.details.iter().find(|a| a.type_url.ends_with("google.rpc.ErrorInfo"))?;
    let info = rpc_status::ErrorInfo::decode(any.value.as_slice()).ok()?;
    (!info.reason.is_empty()).then_some((info.reason, info.metadata))
}

/// Every error the client returns.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A bad key, value, name, path, range, page token, flag or lease, or a
    /// request over a size limit (EINVAL, ENAMETOOLONG, EFBIG).
    InvalidArgument(ErrorInfo),
    /// An absent key, subvolume, snapshot or file (ENOENT), or an unknown or
    /// finished transaction handle.
    NotFound(ErrorInfo),
    /// A subvolume or file name is taken (EEXIST).
    AlreadyExists(ErrorInfo),
    /// Not a directory, is a directory, not empty, link to a directory,
    /// deleting "default"... (ENOTDIR, EISDIR, ENOTEMPTY, EPERM, EMLINK).
    FailedPrecondition(ErrorInfo),
    /// A write to a read-only snapshot or store (EROFS); a kind of
    /// FAILED_PRECONDITION ([`Error::is_failed_precondition`]).
    ReadOnly(ErrorInfo),
    /// The transaction conflicted at commit, or its handle expired: run it again.
    Conflict(ErrorInfo),
    /// The transaction outlived the engine's conflict window: run it again.
    TooOld(ErrorInfo),
    /// A read, or a watcher's start, at a revision the history no longer
    /// keeps (a kind of OUT_OF_RANGE, [`Error::is_too_old`]);
    /// `compact_revision` is the oldest revision still served: go on there.
    Compacted { info: ErrorInfo, compact_revision: u64 },
    /// A read at a revision the store has not reached yet (OUT_OF_RANGE,
    /// reason FUTURE_REVISION); not retried.
    FutureRevision(ErrorInfo),
    /// The server ended a watcher because its subvolume was deleted.
    SubvolumeDeleted(ErrorInfo),
    /// The server ended a watcher whose events were read slower than they
    /// came (past its buffer bound): restart after the last event read.
    SlowReader(ErrorInfo),
    /// A server limit: open transactions, message size.
    ResourceExhausted(ErrorInfo),
    /// The device is full (ENOSPC); a kind of RESOURCE_EXHAUSTED.
    NoSpace(ErrorInfo),
    /// A checksum or structure check failed on a read (EIO).
    DataLoss(ErrorInfo),
    /// The server is stopping or cannot be reached: retry the call.
    Unavailable(ErrorInfo),
    /// The server wants a bearer token and got none or a wrong one.
    Unauthenticated(ErrorInfo),
    /// The caller may not do this.
    PermissionDenied(ErrorInfo),
    /// The call's deadline passed (ETIMEDOUT).
    DeadlineExceeded(ErrorInfo),
    /// The call was cancelled (ECANCELED).
    Cancelled(ErrorInfo),
    /// The server does not know this call.
    Unimplemented(ErrorInfo),
    /// A device I/O error on the server, or a malformed message.
    Internal(ErrorInfo),
    /// The endpoint could not be set up (bad address, unreadable TLS files).
    Transport(String),
    /// An error of the caller's own, returned from a transaction body; the
    /// transaction was aborted and not retried.
    User(Box<dyn std::error::Error + Send + Sync>),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Converts a gRPC status into the matching variant: by the ErrorInfo
    /// reason in its details when the server sent one, else by the code
    /// (and, for read-only and no-space, the message text).
    pub fn from_status(status: &tonic::Status, operation: &'static str) -> Error {
        let code = status.code();
        let msg = if status.message().is_empty() { format!("{code:?}") } else { status.message().to_string() };
        let mut info = ErrorInfo::new(Some(code), msg.clone(), operation);
        if let Some((reason, metadata)) = error_info_of(status) {
            info.reason = reason;
            info.metadata = metadata;
            return Error::from_reason(status, info);
        }
        match code {
            // tonic reports its own client-side deadline as CANCELLED "Timeout expired".
            Code::Cancelled if msg == "Timeout expired" => Error::DeadlineExceeded(info),
            // hyper's "operation was canceled": the connection closed before the request
            // was sent (a server stopping, a TLS server spoken to in plaintext).
            Code::Cancelled if is_connection_lost(status) => Error::Unavailable(info),
            // A call that raced with the server closing its connection never got an
            // answer: a transport failure like a refused connection.
            Code::Unknown if is_connection_lost(status) => Error::Unavailable(info),
            Code::Ok => Error::Internal(ErrorInfo::new(Some(code), "OK status as an error", operation)),
            _ => {
                // The code's class, refined by the spec's text fallbacks (read-only, no space).
                let fallback = spec::FALLBACKS.iter().find(|f| f.code == code && fallback_matches(f, &msg));
                let class = fallback.map(|f| f.class).or_else(|| Class::of_code(code));
                Error::from_class(class.unwrap_or(Class::Internal), info)
            }
        }
    }

    /// The variant of a status that carries an ErrorInfo reason: the
    /// reason's class when it refines the code's, else the code's (the text
    /// is not read).
    pub(crate) fn from_reason(status: &tonic::Status, info: ErrorInfo) -> Error {
        let class = Class::of_reason(&info.reason).or_else(|| Class::of_code(status.code()));
        Error::from_class(class.unwrap_or(Class::Internal), info)
    }

    /// The variant of a spec class (a Compacted's revision from the
    /// ErrorInfo metadata).
    pub(crate) fn from_class(class: Class, info: ErrorInfo) -> Error {
        match class {
            Class::InvalidArgument => Error::InvalidArgument(info),
            Class::NotFound => Error::NotFound(info),
            Class::AlreadyExists => Error::AlreadyExists(info),
            Class::FailedPrecondition => Error::FailedPrecondition(info),
            Class::ReadOnly => Error::ReadOnly(info),
            Class::Conflict => Error::Conflict(info),
            Class::TooOld => Error::TooOld(info),
            Class::Compacted => {
                let rev = info.metadata.get("compact_revision").and_then(|r| r.parse().ok()).unwrap_or(0);
                Error::Compacted { info, compact_revision: rev }
            }
            Class::FutureRevision => Error::FutureRevision(info),
            Class::ResourceExhausted => Error::ResourceExhausted(info),
            Class::NoSpace => Error::NoSpace(info),
            Class::DataLoss => Error::DataLoss(info),
            Class::Unavailable => Error::Unavailable(info),
            Class::Unauthenticated => Error::Unauthenticated(info),
            Class::PermissionDenied => Error::PermissionDenied(info),
            Class::DeadlineExceeded => Error::DeadlineExceeded(info),
            Class::Cancelled => Error::Cancelled(info),
            Class::Unimplemented => Error::Unimplemented(info),
            Class::Internal => Error::Internal(info),
            Class::SubvolumeDeleted => Error::SubvolumeDeleted(info),
            Class::SlowReader => Error::SlowReader(info),
        }
    }

    /// The spec class of the variant; None for `Transport` and `User`.
    pub fn spec_class(&self) -> Option<Class> {
        use Error::*;
        Some(match self {
            InvalidArgument(_) => Class::InvalidArgument,
            NotFound(_) => Class::NotFound,
            AlreadyExists(_) => Class::AlreadyExists,
            FailedPrecondition(_) => Class::FailedPrecondition,
            ReadOnly(_) => Class::ReadOnly,
            Conflict(_) => Class::Conflict,
            TooOld(_) => Class::TooOld,
            Compacted { .. } => Class::Compacted,
            FutureRevision(_) => Class::FutureRevision,
            SubvolumeDeleted(_) => Class::SubvolumeDeleted,
            SlowReader(_) => Class::SlowReader,
            ResourceExhausted(_) => Class::ResourceExhausted,
            NoSpace(_) => Class::NoSpace,
            DataLoss(_) => Class::DataLoss,
            Unavailable(_) => Class::Unavailable,
            Unauthenticated(_) => Class::Unauthenticated,
            PermissionDenied(_) => Class::PermissionDenied,
            DeadlineExceeded(_) => Class::DeadlineExceeded,
            Cancelled(_) => Class::Cancelled,
            Unimplemented(_) => Class::Unimplemented,
            Internal(_) => Class::Internal,
            Transport(_) | User(_) => return None,
        })
    }

    /// True when the error's class is `class` or refines it (the spec's
    /// "parent": ReadOnly is a FailedPrecondition, ...).
    pub fn is_a(&self, class: Class) -> bool {
        let mut c = self.spec_class();
        while let Some(k) = c {
            if k == class {
                return true;
            }
            c = k.parent();
        }
        false
    }

    /// An invalid argument refused by the client before sending (no code).
    pub(crate) fn invalid(operation: &'static str, message: impl Into<String>) -> Error {
        Error::InvalidArgument(ErrorInfo::new(None, message, operation))
    }

    /// Wraps an error of the caller's own, to return from a transaction body.
    pub fn user(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::User(e.into())
    }

    /// The details of a status-like error; None for `Transport` and `User`.
    pub fn info(&self) -> Option<&ErrorInfo> {
        use Error::*;
        match self {
            InvalidArgument(i)
            | NotFound(i)
            | AlreadyExists(i)
            | FailedPrecondition(i)
            | ReadOnly(i)
            | Conflict(i)
            | TooOld(i)
            | FutureRevision(i)
            | ResourceExhausted(i)
            | NoSpace(i)
            | DataLoss(i)
            | Unavailable(i)
            | Unauthenticated(i)
            | PermissionDenied(i)
            | DeadlineExceeded(i)
            | Cancelled(i)
            | Unimplemented(i)
            | Internal(i)
            | SubvolumeDeleted(i)
            | SlowReader(i) => Some(i),
            Compacted { info, .. } => Some(info),
            Transport(_) | User(_) => None,
        }
    }

    /// The gRPC code, if the error came from (or stands for) a status.
    pub fn code(&self) -> Option<Code> {
        self.info().and_then(|i| i.code)
    }

    /// The message without the operation.
    pub fn message(&self) -> String {
        match self {
            Error::Transport(m) => m.clone(),
            Error::User(e) => e.to_string(),
            _ => self.info().map(|i| i.message.clone()).unwrap_or_default(),
        }
    }

    /// The POSIX name of a Files error ("ENOENT"): the ErrorInfo's
    /// metadata["errno"], else the name the message starts with; or None.
    pub fn errno_name(&self) -> Option<&str> {
        if let Some(errno) = self.info()?.metadata.get("errno") {
            return Some(errno);
        }
        let m = &self.info()?.message;
        let (head, _) = m.split_once(": ")?;
        let ok = head.len() >= 2
            && head.starts_with('E')
            && head[1..].bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
        ok.then_some(head)
    }

    /// True when the whole transaction should run again: Conflict, TooOld,
    /// and a read's Compacted (a transaction's read revision left the
    /// history; docs/api.md), not a watcher's (the spec's "retryable").
    pub fn is_retryable_transaction(&self) -> bool {
        match self {
            Error::Compacted { info, .. } if info.operation == "watch" => false,
            _ => self.spec_class().is_some_and(Class::retryable),
        }
    }

    /// TooOld or its refinement Compacted (OUT_OF_RANGE).
    pub fn is_too_old(&self) -> bool {
        self.is_a(Class::TooOld)
    }

    /// For [`Error::Compacted`]: the oldest revision still served.
    pub fn compact_revision(&self) -> Option<u64> {
        match self {
            Error::Compacted { compact_revision, .. } => Some(*compact_revision),
            _ => None,
        }
    }

    /// FailedPrecondition or its refinement ReadOnly.
    pub fn is_failed_precondition(&self) -> bool {
        self.is_a(Class::FailedPrecondition)
    }

    /// ResourceExhausted or its refinement NoSpace.
    pub fn is_resource_exhausted(&self) -> bool {
        self.is_a(Class::ResourceExhausted)
    }

    /// The class name shared by every cowkv client ("not_found", "read_only", ...).
    pub fn class(&self) -> &'static str {
        match self {
            Error::Transport(_) => "transport",
            Error::User(_) => "user",
            _ => self.spec_class().map_or("internal", Class::name),
        }
    }
}

/// A text fallback matches: a prefix, or a substring and none of the exceptions.
fn fallback_matches(f: &spec::Fallback, msg: &str) -> bool {
    if f.prefixes.iter().any(|p| msg.starts_with(p)) {
        return true;
    }
    let text = if f.ignore_case { msg.to_ascii_lowercase() } else { msg.to_string() };
    !f.unless.iter().any(|u| text.contains(u)) && f.contains.iter().any(|c| text.contains(c))
}

fn is_connection_lost(status: &tonic::Status) -> bool {
    let mut text = status.message().to_ascii_lowercase();
    let mut src = std::error::Error::source(status);
    while let Some(e) = src {
        text.push(' ');
        text.push_str(&e.to_string().to_ascii_lowercase());
        src = e.source();
    }
    [
        "connection closed",
        "connection reset",
        "broken pipe",
        "channel closed",
        "connection error",
        "operation was canceled",
    ]
    .iter()
    .any(|p| text.contains(p))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Transport(m) => write!(f, "transport: {m}"),
            Error::User(e) => write!(f, "{e}"),
            _ => {
                let i = self.info().expect("status-like");
                if i.operation.is_empty() {
                    write!(f, "{}", i.message)
                } else {
                    write!(f, "{}: {}", i.operation, i.message)
                }
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::User(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Status;

    fn map(code: Code, msg: &str) -> Error {
        Error::from_status(&Status::new(code, msg), "op")
    }

    #[test]
    fn every_code_has_its_variant() {
        let want = [
            (Code::InvalidArgument, "invalid_argument"),
            (Code::NotFound, "not_found"),
            (Code::AlreadyExists, "already_exists"),
            (Code::FailedPrecondition, "failed_precondition"),
            (Code::Aborted, "conflict"),
            (Code::OutOfRange, "too_old"),
            (Code::ResourceExhausted, "resource_exhausted"),
            (Code::DataLoss, "data_loss"),
            (Code::Unavailable, "unavailable"),
            (Code::Unauthenticated, "unauthenticated"),
            (Code::PermissionDenied, "permission_denied"),
            (Code::DeadlineExceeded, "deadline_exceeded"),
            (Code::Cancelled, "cancelled"),
            (Code::Unimplemented, "unimplemented"),
            (Code::Internal, "internal"),
            (Code::Unknown, "internal"),
        ];
        for (code, class) in want {
            let e = map(code, "something");
            assert_eq!(e.class(), class, "{code:?}");
            assert_eq!(e.code(), Some(code));
        }
    }

    #[test]
    fn read_only_and_no_space_are_refined() {
        assert!(matches!(map(Code::FailedPrecondition, "subvolume 'x' is a read-only snapshot"), Error::ReadOnly(_)));
        assert!(matches!(map(Code::FailedPrecondition, "EROFS: /a"), Error::ReadOnly(_)));
        assert!(matches!(
            map(Code::FailedPrecondition, "snapshot: 'x' is not a read-only snapshot"),
            Error::FailedPrecondition(_)
        ));
        assert!(matches!(map(Code::FailedPrecondition, "ENOTEMPTY: d"), Error::FailedPrecondition(_)));
        assert!(map(Code::FailedPrecondition, "EROFS: /a").is_failed_precondition());
        assert!(matches!(map(Code::ResourceExhausted, "ENOSPC: full"), Error::NoSpace(_)));
        assert!(matches!(map(Code::ResourceExhausted, "No space left on device"), Error::NoSpace(_)));
        assert!(matches!(map(Code::ResourceExhausted, "too many open transactions"), Error::ResourceExhausted(_)));
        assert!(map(Code::ResourceExhausted, "ENOSPC: x").is_resource_exhausted());
    }

    #[test]
    fn only_conflict_and_too_old_are_retryable() {
        for c in 1..=16 {
            let code = Code::from_i32(c);
            let want = matches!(code, Code::Aborted | Code::OutOfRange);
            assert_eq!(map(code, "m").is_retryable_transaction(), want, "{code:?}");
        }
    }

    #[test]
    fn message_operation_and_errno() {
        let e = map(Code::FailedPrecondition, "ENOTEMPTY: directory not empty: /d");
        assert_eq!(e.to_string(), "op: ENOTEMPTY: directory not empty: /d");
        assert_eq!(e.message(), "ENOTEMPTY: directory not empty: /d");
        assert_eq!(e.errno_name(), Some("ENOTEMPTY"));
        assert_eq!(map(Code::NotFound, "key not found: \"k\"").errno_name(), None);
        assert_eq!(map(Code::NotFound, "E: x").errno_name(), None);
    }

    #[test]
    fn tonic_timeouts_and_lost_connections() {
        assert!(matches!(map(Code::Cancelled, "Timeout expired"), Error::DeadlineExceeded(_)));
        assert!(matches!(map(Code::Cancelled, "cancelled by client"), Error::Cancelled(_)));
        assert!(matches!(map(Code::Cancelled, "operation was canceled"), Error::Unavailable(_)));
        assert!(matches!(map(Code::Unknown, "transport error: connection closed"), Error::Unavailable(_)));
        assert!(matches!(map(Code::Internal, "device unavailable: EIO"), Error::Internal(_)));
    }

    /// The status cowkvd sends: google.rpc.Status{code, message, [Any(ErrorInfo)]} in its details.
    fn with_info(code: Code, msg: &str, reason: &str, md: &[(&str, &str)]) -> Error {
        use prost::Message;
        let info = rpc_status::ErrorInfo {
            reason: reason.into(),
            domain: "cowkv.dev".into(),
            metadata: md.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let any = rpc_status::Any {
            type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
            value: info.encode_to_vec(),
        };
        let st = rpc_status::Status { code: code as i32, message: msg.into(), details: vec![any] };
        Error::from_status(&Status::with_details(code, msg, st.encode_to_vec().into()), "op")
    }

    /// The variant comes from the reason, whatever the text says: the
    /// messages are chosen so that the text fallback would pick another.
    #[test]
    fn error_info_reason_decides() {
        let cases = [
            (Code::FailedPrecondition, "READ_ONLY_SNAPSHOT", "write refused", "read_only"),
            (Code::FailedPrecondition, "EROFS", "store", "read_only"),
            (Code::FailedPrecondition, "ENOTEMPTY", "read-only thing is not empty", "failed_precondition"),
            (Code::ResourceExhausted, "ENOSPC", "device full", "no_space"),
            (Code::ResourceExhausted, "SERVER_BUSY", "no space in the queue", "resource_exhausted"),
            (Code::ResourceExhausted, "LIMIT", "no space for the response", "resource_exhausted"),
            (Code::Aborted, "CONFLICT", "x", "conflict"),
            (Code::OutOfRange, "TOO_OLD", "x", "too_old"),
            (Code::OutOfRange, "COMPACTED", "x", "compacted"),
            (Code::OutOfRange, "FUTURE_REVISION", "x", "future_revision"),
            (Code::NotFound, "LEASE_NOT_FOUND", "x", "not_found"),
            (Code::Internal, "DEVICE_UNAVAILABLE", "x", "internal"),
            (Code::Unavailable, "STOPPING", "x", "unavailable"),
        ];
        for (code, reason, msg, class) in cases {
            let e = with_info(code, msg, reason, &[("compact_revision", "42")]);
            assert_eq!(e.class(), class, "{reason}");
            let info = e.info().unwrap();
            assert_eq!((info.code, info.reason.as_str(), info.message.as_str()), (Some(code), reason, msg));
            assert_eq!(info.metadata.get("compact_revision").map(String::as_str), Some("42"));
            let retry = matches!(class, "conflict" | "too_old" | "compacted");
            assert_eq!(e.is_retryable_transaction(), retry, "{reason}");
        }
        let c = with_info(Code::OutOfRange, "x", "COMPACTED", &[("compact_revision", "17")]);
        assert_eq!(c.compact_revision(), Some(17));
        assert!(c.is_too_old());
        let ro = with_info(Code::FailedPrecondition, "no prefix", "READ_ONLY_SNAPSHOT", &[("errno", "EROFS")]);
        assert_eq!(ro.errno_name(), Some("EROFS"));
        assert!(ro.is_failed_precondition());
    }

    #[test]
    fn damaged_or_absent_details_fall_back_to_the_text() {
        let bad = Error::from_status(
            &Status::with_details(Code::FailedPrecondition, "EROFS: x", vec![0x1a, 0x7f].into()),
            "op",
        );
        assert_eq!((bad.class(), bad.info().unwrap().reason.as_str()), ("read_only", ""));
        assert_eq!(map(Code::ResourceExhausted, "no space left").class(), "no_space");
    }

    #[test]
    fn client_side_errors_have_no_code() {
        let e = Error::invalid("put", "key: a key is 1..1024 bytes, not 0");
        assert_eq!(e.code(), None);
        assert_eq!(e.class(), "invalid_argument");
    }

    /// clients/spec/*.json, read as JSON (not through the generated
    /// crate::spec): None in a packaged crate, which has no spec beside it.
    fn spec_json(name: &str) -> Option<serde_json::Value> {
        let path = format!("{}/../spec/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).ok()?;
        Some(serde_json::from_str(&text).expect("spec JSON"))
    }

    fn code_named(name: &str) -> Code {
        (0..=16).map(Code::from_i32).find(|c| format!("{c:?}").to_ascii_uppercase() == name.replace('_', "")).unwrap()
    }

    /// Every class, code, reason and text fallback of the spec maps as it says.
    #[test]
    fn spec_errors_map_as_the_spec_says() {
        let Some(spec) = spec_json("errors") else { return };
        let str_of = |v: &serde_json::Value, k: &str| v[k].as_str().map(str::to_string);
        for c in spec["classes"].as_array().unwrap() {
            let class = Class::ALL.into_iter().find(|k| Some(k.name().to_string()) == str_of(c, "name")).unwrap();
            let e = Error::from_class(class, ErrorInfo::new(Some(code_named(c["code"].as_str().unwrap())), "m", "op"));
            assert_eq!(Some(e.class().to_string()), str_of(c, "name"));
            assert_eq!(e.is_retryable_transaction(), c["retryable"].as_bool().unwrap(), "{}", e.class());
            if let Some(parent) = str_of(c, "parent") {
                assert!(e.is_a(Class::ALL.into_iter().find(|k| k.name() == parent).unwrap()), "{parent}");
            }
        }
        let by_code: HashMap<String, String> = spec["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (str_of(c, "name").unwrap(), str_of(c, "class").unwrap()))
            .collect();
        for (code, class) in &by_code {
            assert_eq!(map(code_named(code), "m").class(), class, "{code}");
        }
        for r in spec["reasons"].as_array().unwrap() {
            let reason = str_of(r, "reason").unwrap();
            for code in r["codes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()) {
                let want = str_of(r, "class").unwrap_or_else(|| by_code[code].clone());
                let e = with_info(code_named(code), "read-only: no space", &reason, &[]);
                assert_eq!(e.class(), want, "{reason} {code}");
            }
        }
        for f in spec["fallbacks"].as_array().unwrap() {
            let code = code_named(f["code"].as_str().unwrap());
            for key in ["prefixes", "contains"] {
                for text in f[key].as_array().unwrap() {
                    let msg = format!("{} and more", text.as_str().unwrap());
                    assert_eq!(Some(map(code, &msg).class().to_string()), str_of(f, "class"), "{msg}");
                }
            }
        }
    }

    #[test]
    fn spec_limits_are_the_clients() {
        use crate::validate::*;
        let Some(spec) = spec_json("limits") else { return };
        let have: HashMap<&str, i64> = [
            ("max_key_bytes", MAX_KEY_BYTES as i64),
            ("max_value_bytes", MAX_VALUE_BYTES as i64),
            ("max_bound_bytes", MAX_BOUND_BYTES as i64),
            ("max_name_bytes", MAX_NAME_BYTES as i64),
            ("max_path_bytes", MAX_PATH_BYTES as i64),
            ("max_path_depth", MAX_PATH_DEPTH as i64),
            ("max_symlink_bytes", MAX_SYMLINK_BYTES as i64),
            ("max_write_chunk_bytes", spec::MAX_WRITE_CHUNK_BYTES as i64),
            ("max_txn_ops", spec::MAX_TXN_OPS as i64),
            ("max_lease_ms", MAX_LEASE_MS as i64),
            ("max_lease_ttl_seconds", MAX_LEASE_TTL),
        ]
        .into_iter()
        .collect();
        let limits = spec["limits"].as_array().unwrap();
        assert_eq!(limits.len(), have.len());
        for l in limits {
            let name = l["name"].as_str().unwrap();
            assert_eq!(Some(have[name]), l["value"].as_i64(), "{name}");
        }
    }
}
