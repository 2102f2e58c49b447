//! The harness's own log level (`--log-level`).

crate::words::word_enum!(
    /// The harness's log level.
    LogLevel, "log level" {
        /// Errors only.
        Error = "error",
        /// Warnings and errors.
        Warn = "warn",
        /// The default.
        Info = "info",
        /// Debugging detail.
        Debug = "debug",
        /// Everything.
        Trace = "trace",
    }
);
