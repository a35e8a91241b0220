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

#[derive(Clone, Debug)]
pub struct Ring {
    buf: Box<[Sample]>,
    head: u16,
    len: u16,
}

impl Default for Ring {
    fn default() -> Self {
        Self::with_capacity(HISTORY_LEN)
    }
}

impl Ring {
    pub fn with_capacity(cap: usize) -> Self {
        let cap = cap.clamp(1, u16::MAX as usize);
        Self { buf: vec![Sample::default(); cap].into_boxed_slice(), head: 0, len: 0 }
    }

    pub fn push(&mut self, s: Sample) {
        let cap = self.buf.len();
        let idx = (self.head as usize + self.len as usize) % cap;
        self.buf[idx] = s;
        if (self.len as usize) < cap {
            self.len += 1;
        } else {
            self.head = ((self.head as usize + 1) % cap) as u16;
        }
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    pub fn last(&self) -> Option<Sample> {
        if self.len == 0 {
            return None;
        }
        let cap = self.buf.len();
        Some(self.buf[(self.head as usize + self.len as usize - 1) % cap])
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = Sample> + '_ {
        let cap = self.buf.len();
        (0..self.len as usize).map(move |i| self.buf[(self.head as usize + i) % cap])
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
    fn sample_is_compact_and_clamped() {
        assert_eq!(std::mem::size_of::<Sample>(), 6);
        assert_eq!(Sample::new(250, 101, 0, 0).util, Some(100));
        assert_eq!(Sample::new(250, 101, 0, 0).mem_pct, 100);
        assert_eq!(Sample::without_util(40, 300, 50).util, None);
    }
}
