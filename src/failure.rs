//! What a command returns: its exit code, and on failure a message that names the fix.
//! Outside `cli` so that what the commands call (`requests`, the dashboard, `binky mcp`)
//! shares it without importing the command-line layer.

use binky_controllers::store::StoreError;

/// Exit codes.
pub mod exit {
    /// Done.
    pub const OK: i32 = 0;
    /// Failed.
    pub const FAILED: i32 = 1;
    /// Bad usage or config.
    pub const USAGE: i32 = 2;
    /// Still pending when the wait ran out (EX_TEMPFAIL).
    pub const PENDING: i32 = 75;
}

/// A command's failure: an exit code and a message that names the fix.
#[derive(Debug)]
pub struct Failure {
    /// Exit code.
    pub code: i32,
    /// What went wrong and what to do.
    pub message: String,
}

impl Failure {
    /// Bad usage or config (exit 2).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::USAGE,
            message: message.into(),
        }
    }

    /// It failed (exit 1).
    pub fn failed(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::FAILED,
            message: message.into(),
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        match e {
            StoreError::ProjectNameTaken { .. } => Failure::usage(e.to_string()),
            _ => Failure::failed(e.to_string()),
        }
    }
}
