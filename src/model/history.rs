//! Bounded telemetry history: a fixed-capacity ring per GPU so memory stays flat however
//! long the cockpit runs (at 520,000 GPUs every byte per sample counts).

/// One compact telemetry sample: 6 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// GPU (or MIG engine) utilisation, percent 0..=100; `None` when the source could not
    /// measure it (NVML has no whole-GPU utilisation in MIG mode, GPM needs Hopper or newer).
    /// Never read as 0 %: an unknown utilisation is neither idle nor busy.
    pub util: Option<u8>,
    /// Framebuffer used, percent of total 0..=100.
    pub mem_pct: u8,
    /// Board power in watts.
    pub power_w: u16,
    /// Temperature in °C.
    pub temp_c: u8,
}

impl Sample {
    pub fn new(util: u8, mem_pct: u8, power_w: u16, temp_c: u8) -> Self {
        Self { util: Some(util.min(100)), mem_pct: mem_pct.min(100), power_w, temp_c }
    }

    /// A sample whose source had no utilisation figure (memory, power and temperature known).
    pub fn without_util(mem_pct: u8, power_w: u16, temp_c: u8) -> Self {
        Self { util: None, ..Self::new(0, mem_pct, power_w, temp_c) }
    }
}

/// Number of samples kept per GPU.
pub const HISTORY_LEN: usize = 60;

/// The newest `cap` samples, oldest first. The buffer grows with the samples (4, 8, 16, 32,
/// then `cap`): a GPU that never reports telemetry (off screen, no agent streaming it) costs
/// the empty ring's 32 bytes, not `cap` samples' worth (at 520,000 GPUs, 190 MB).
#[derive(Clone, Debug)]
pub struct Ring {
    buf: Vec<Sample>,
    /// Where the oldest sample is once the buffer is full.
    head: u16,
    cap: u16,
}

impl Default for Ring {
    fn default() -> Self {
        Self::with_capacity(HISTORY_LEN)
    }
}

impl Ring {
    pub fn with_capacity(cap: usize) -> Self {
        let cap = cap.clamp(1, u16::MAX as usize) as u16;
        Self { buf: Vec::new(), head: 0, cap }
    }

    pub fn push(&mut self, s: Sample) {
        let cap = self.cap as usize;
        if self.buf.len() < cap {
            if self.buf.len() == self.buf.capacity() {
                let grow = self.buf.len().max(4).min(cap - self.buf.len());
                self.buf.reserve_exact(grow);
            }
            self.buf.push(s);
        } else {
            self.buf[self.head as usize] = s;
            self.head = ((self.head as usize + 1) % cap) as u16;
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.cap as usize
    }

    pub fn last(&self) -> Option<Sample> {
        let n = self.buf.len();
        if n == 0 {
            return None;
        }
        Some(self.buf[(self.head as usize + n - 1) % n])
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = Sample> + '_ {
        let n = self.buf.len();
        (0..n).map(move |i| self.buf[(self.head as usize + i) % n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_samples_in_order() {
        let mut r = Ring::with_capacity(3);
        assert!(r.is_empty());
        for u in 1..=5u8 {
            r.push(Sample::new(u, 0, 0, 0));
        }
        assert_eq!(r.len(), 3);
        let utils: Vec<Option<u8>> = r.iter().map(|s| s.util).collect();
        assert_eq!(utils, vec![Some(3), Some(4), Some(5)]);
        assert_eq!(r.last().and_then(|s| s.util), Some(5));
    }

    #[test]
    fn ring_grows_with_its_samples_up_to_its_capacity() {
        let mut r = Ring::with_capacity(HISTORY_LEN);
        assert_eq!(r.buf.capacity(), 0, "no samples, nothing allocated");
        r.push(Sample::new(1, 0, 0, 0));
        assert_eq!(r.buf.capacity(), 4);
        for u in 2..=200u8 {
            r.push(Sample::new(u % 101, 0, 0, 0));
            assert!(r.buf.capacity() <= HISTORY_LEN, "never more than the history kept");
        }
        assert_eq!((r.len(), r.buf.capacity()), (HISTORY_LEN, HISTORY_LEN));
        let utils: Vec<u8> = r.iter().filter_map(|s| s.util).collect();
        let want: Vec<u8> = (141..=200u8).map(|u| u % 101).collect();
        assert_eq!(utils, want, "the newest 60, oldest first");
        assert_eq!(r.last().and_then(|s| s.util), Some(200 % 101));
    }

    #[test]
    fn sample_is_compact_and_clamped() {
        assert_eq!(std::mem::size_of::<Sample>(), 6);
        assert_eq!(Sample::new(250, 101, 0, 0).util, Some(100));
        assert_eq!(Sample::new(250, 101, 0, 0).mem_pct, 100);
        assert_eq!(Sample::without_util(40, 300, 50).util, None);
    }
}
