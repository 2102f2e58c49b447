//! How the TC-05 sweep sends its requests (`--perf-sweep-mode`).

crate::words::word_enum!(
    /// The sweep's load model.
    SweepMode, "sweep mode" {
        /// A closed loop per concurrency level: N requests in flight, the
        /// next sent when one ends (`perf_concurrency_levels`).
        Closed = "closed",
        /// An open loop per rate: Poisson arrivals at a set rate, each
        /// request's schedule delay recorded (`perf_sweep_rates`).
        Open = "open",
    }
);
