//! Duration histograms with the contract's 14 fixed bounds (docs/http-api.md#rpcs).
//! Buckets are kept cumulative as they are filled, so a snapshot is a plain
//! copy and `bucket_counts` can never decrease from one bound to the next.

use crate::wire::observe::{Histogram as WireHistogram, LatencyBucket, RpcLatency};

/// Upper bounds in seconds: sub-millisecond up to a long poll's tail.
pub const BOUNDS_SECONDS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0,
];

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Histogram {
    /// `cumulative[i]` counts observations `<= BOUNDS_SECONDS[i]`.
    cumulative: [u64; BOUNDS_SECONDS.len()],
    count: u64,
    sum_seconds: f64,
}

impl Histogram {
    pub(super) fn observe(&mut self, seconds: f64) {
        let seconds = sanitize_seconds(seconds);
        for (bucket, bound) in self.cumulative.iter_mut().zip(BOUNDS_SECONDS) {
            if seconds <= bound {
                *bucket = bucket.saturating_add(1);
            }
        }
        self.count = self.count.saturating_add(1);
        self.sum_seconds += seconds;
    }

    pub(super) fn to_wire(self) -> WireHistogram {
        WireHistogram {
            bounds_seconds: BOUNDS_SECONDS.to_vec(),
            bucket_counts: self.cumulative.to_vec(),
            count: self.count,
            sum_seconds: self.sum_seconds,
        }
    }

    /// The handler-latency shape: the same data with each bound beside its count.
    pub(super) fn to_latency(self, rpc: &str) -> RpcLatency {
        RpcLatency {
            rpc: rpc.to_string(),
            buckets: BOUNDS_SECONDS
                .iter()
                .zip(self.cumulative)
                .map(|(bound, count)| LatencyBucket {
                    upper_bound_seconds: *bound,
                    count,
                })
                .collect(),
            count: self.count,
            sum_seconds: self.sum_seconds,
        }
    }
}

/// A duration as the contract allows it: finite and non-negative. A clock
/// that steps backwards (or a NaN from a broken timer) reads as zero rather
/// than poisoning a sum that consumers reject when negative or not finite.
pub(super) fn sanitize_seconds(seconds: f64) -> f64 {
    if seconds.is_finite() && seconds > 0.0 {
        seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative() {
        let mut h = Histogram::default();
        for s in [0.0005, 0.003, 0.003, 0.7, 30.0] {
            h.observe(s);
        }
        let wire = h.to_wire();
        assert_eq!(wire.bounds_seconds.len(), 14);
        assert_eq!(
            wire.bucket_counts,
            vec![1, 1, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4]
        );
        assert_eq!(wire.count, 5);
        assert!((wire.sum_seconds - 30.7065).abs() < 1e-9);
        assert!(wire.bucket_counts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn a_bound_is_inclusive() {
        let mut h = Histogram::default();
        h.observe(0.001);
        assert_eq!(h.to_wire().bucket_counts[0], 1);
    }

    #[test]
    fn broken_durations_count_as_zero() {
        let mut h = Histogram::default();
        h.observe(f64::NAN);
        h.observe(-1.0);
        h.observe(f64::INFINITY);
        let wire = h.to_wire();
        assert_eq!(wire.count, 3);
        assert_eq!(wire.bucket_counts[0], 3);
        assert_eq!(wire.sum_seconds, 0.0);
    }
}
