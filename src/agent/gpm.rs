//! Engine activity per MIG GPU instance from GPM (GPU Performance Monitoring, Hopper and
//! newer). NVML has no utilisation for a MIG instance (`nvmlDeviceGetUtilizationRates` is
//! NotSupported in MIG mode); GPM gives it as the graphics-engine activity between two
//! samples of the same GPU instance, the figure dcgm-exporter publishes as
//! `DCGM_FI_PROF_GR_ENGINE_ACTIVE`. So the agent keeps each instance's previous GPM sample
//! and compares it with the new one: the first sample of an instance has no figure yet
//! (`None`, never 0 %), every later one covers the interval since the one before.
//!
//! Read-only: sampling needs no setting changed (GPM streaming is not touched).

use std::collections::HashMap;
use std::hash::Hash;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, GpmSample, Nvml};

/// The previous sample per key (parent GPU uuid, GPU instance id). Keys not sampled in a
/// round are dropped at its end (an instance destroyed by a reslice frees its sample).
#[derive(Debug)]
pub struct History<K, S> {
    prev: HashMap<K, (S, u64)>,
    round: u64,
}

impl<K: Eq + Hash, S> Default for History<K, S> {
    fn default() -> Self {
        Self { prev: HashMap::new(), round: 0 }
    }
}

impl<K: Eq + Hash, S> History<K, S> {
    /// Starts a sampling round.
    pub fn begin(&mut self) {
        self.round += 1;
    }

    /// Keeps `new` as the key's latest sample and returns the one it replaces.
    pub fn exchange(&mut self, key: K, new: S) -> Option<S> {
        self.prev.insert(key, (new, self.round)).map(|(s, _)| s)
    }

    /// Marks a key as still present without a new sample (its GPM read failed this round):
    /// the old sample stays, so the next success covers the longer interval.
    pub fn keep(&mut self, key: &K) {
        if let Some((_, r)) = self.prev.get_mut(key) {
            *r = self.round;
        }
    }

    /// Ends the round: forgets (drops) the samples of keys not seen in it.
    pub fn end(&mut self) {
        let round = self.round;
        self.prev.retain(|_, (_, r)| *r == round);
    }

    pub fn len(&self) -> usize {
        self.prev.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prev.is_empty()
    }
}

/// A GPM sample kept between agent samples. `GpmSample` borrows the `Nvml` it came from,
/// which the backend owns behind an `Arc`; this holds its own `Arc` and the raw handle, and
/// frees the handle exactly once, when dropped.
pub struct Owned {
    nvml: Arc<Nvml>,
    raw: nvml_wrapper_sys::bindings::nvmlGpmSample_t,
}

// SAFETY: the handle is only ever used by the one sampler thread that owns this value (the
// agent's backend is `Send`, not `Sync`); `GpmSample` itself is `Send`.
unsafe impl Send for Owned {}

impl Owned {
    pub fn new(nvml: &Arc<Nvml>, sample: GpmSample<'_>) -> Owned {
        Owned { nvml: Arc::clone(nvml), raw: sample.into_handle() }
    }

    /// The sample as nvml-wrapper's type, without giving up ownership.
    fn view(&self) -> ManuallyDrop<GpmSample<'_>> {
        // SAFETY: `raw` came from `into_handle` of a sample of this same library and is
        // freed only by `Drop` below; ManuallyDrop keeps the view from freeing it.
        ManuallyDrop::new(unsafe { GpmSample::from_handle(&self.nvml, self.raw) })
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: as in `view`; this is the one place the handle is freed.
        drop(unsafe { GpmSample::from_handle(&self.nvml, self.raw) });
    }
}

/// GPM per GPU instance of every MIG GPU on the node, across samples.
#[derive(Default)]
pub struct MigActivity {
    history: History<(String, u32), Owned>,
    /// Parents where GPM is not supported (pre-Hopper, or a driver without it): asked once.
    unsupported: HashMap<String, String>,
    /// This round's figures: a GPU instance with several compute instances is one GPM
    /// instance, asked once per round (a second sample right after the first would measure
    /// an empty interval).
    this_round: HashMap<(String, u32), Option<u32>>,
}

impl MigActivity {
    pub fn begin(&mut self) {
        self.history.begin();
        self.this_round.clear();
    }

    pub fn end(&mut self) {
        self.history.end();
    }

    /// Graphics-engine activity (percent) of GPU instance `gi` on `parent` since the last
    /// sample; `None` on the first sample of an instance and where GPM is not available.
    pub fn activity(&mut self, nvml: &Arc<Nvml>, parent: &Device<'_>, parent_uuid: &str, gi: u32) -> Option<u32> {
        let key = (parent_uuid.to_string(), gi);
        if let Some(known) = self.this_round.get(&key) {
            return *known;
        }
        let got = self.measure(nvml, parent, parent_uuid, gi);
        self.this_round.insert(key, got);
        got
    }

    fn measure(&mut self, nvml: &Arc<Nvml>, parent: &Device<'_>, parent_uuid: &str, gi: u32) -> Option<u32> {
        if self.unsupported.contains_key(parent_uuid) {
            return None;
        }
        if !self.history.prev.keys().any(|(p, _)| p == parent_uuid) {
            // First time this GPU is seen (or all its instances were gone): check support once.
            match parent.gpm_support() {
                Ok(true) => {}
                Ok(false) => return self.unsupported_on(parent_uuid, "the GPU does not support GPM".into()),
                Err(e) => return self.unsupported_on(parent_uuid, e.to_string()),
            }
        }
        let key = (parent_uuid.to_string(), gi);
        let new = match parent.gpm_mig_sample(gi) {
            Ok(s) => Owned::new(nvml, s),
            Err(e @ (NvmlError::NotSupported | NvmlError::NoPermission)) => {
                return self.unsupported_on(parent_uuid, format!("GPM MIG sample: {e}"));
            }
            Err(_) => {
                self.history.keep(&key);
                return None;
            }
        };
        let prev = self.history.exchange(key.clone(), new)?;
        let new = self.history.prev.get(&key).map(|(s, _)| s)?;
        let (a, b) = (prev.view(), new.view());
        let got = nvml_wrapper::gpm::gpm_metrics_get(nvml.as_ref(), &a, &b, &[GpmMetricId::GraphicsUtil]).ok()?;
        let value = got.into_iter().next()?.ok()?.value;
        value.is_finite().then(|| value.clamp(0.0, 100.0).round() as u32)
    }

    fn unsupported_on(&mut self, parent_uuid: &str, why: String) -> Option<u32> {
        eprintln!(
            "fabrik agent: nvml: GPU {parent_uuid}: no per-MIG-instance utilisation ({why}); instances report memory only"
        );
        self.unsupported.insert(parent_uuid.to_string(), why);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A stand-in for a GPM sample that counts how many were freed.
    struct Counted(u32, Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_first_sample_has_nothing_to_compare_and_later_ones_get_the_previous() {
        let freed = Arc::new(AtomicUsize::new(0));
        let mut h: History<(String, u32), Counted> = History::default();
        h.begin();
        assert!(h.exchange(("GPU-a".into(), 1), Counted(1, freed.clone())).is_none(), "first sample: no figure");
        assert!(h.exchange(("GPU-a".into(), 2), Counted(10, freed.clone())).is_none());
        h.end();
        h.begin();
        let prev = h.exchange(("GPU-a".into(), 1), Counted(2, freed.clone())).map(|c| c.0);
        assert_eq!(prev, Some(1), "the second sample is compared with the first");
        h.keep(&("GPU-a".into(), 2));
        h.end();
        assert_eq!(h.len(), 2, "a failed read keeps the instance's old sample");
        assert_eq!(freed.load(Ordering::Relaxed), 1, "the replaced sample was freed once");
        // GI 2 is destroyed by a reslice: the next round does not see it, and its sample goes.
        h.begin();
        assert_eq!(h.exchange(("GPU-a".into(), 1), Counted(3, freed.clone())).map(|c| c.0), Some(2));
        h.end();
        assert_eq!(h.len(), 1);
        assert_eq!(freed.load(Ordering::Relaxed), 3);
        drop(h);
        assert_eq!(freed.load(Ordering::Relaxed), 4, "every sample is freed exactly once");
    }
}
