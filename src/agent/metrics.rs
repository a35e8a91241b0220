//! `/metrics`: a sample set in the Prometheus text format (0.0.4) with dcgm-exporter's
//! metric names and labels, so an existing Prometheus and its dashboards scrape the agent
//! unchanged (protocols.md §6).
//!
//! Written with `prometheus-client` (label escaping, one series per label set, the
//! exposition syntax). Its `Counter` adds `_total` to a family's name for the series, and
//! dcgm-exporter's counters already end in `_TOTAL`, so those are [`Total`], which keeps the
//! name as given; the agent's own `fabrik_agent_samples_total` is the crate's `Counter`.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use super::wire::{GpuSample, NodeSample, PodRef};

/// The agent's own counters, rendered after the GPU series.
#[derive(Clone, Copy, Debug, Default)]
pub struct SelfStats {
    pub samples_total: u64,
    pub sample_seconds: f64,
    pub stream_readers: u64,
}

/// A series' labels, in the order dcgm-exporter writes them; empty values are left out.
type Labels = Vec<(&'static str, String)>;

/// A counter exposed under exactly its registered name (no `_total` added).
#[derive(Debug, Default)]
struct Total(AtomicU64);

impl TypedMetric for Total {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for Total {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // A gauge's encoding is the bare `name{labels} value` line.
        encoder.encode_gauge(&self.0.load(Ordering::Relaxed))
    }
    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

type GaugeF = Gauge<f64, AtomicU64>;

/// The metric families in the order they are written.
struct Families {
    gpu_util: Family<Labels, GaugeF>,
    mem_copy_util: Family<Labels, GaugeF>,
    fb_used: Family<Labels, GaugeF>,
    fb_free: Family<Labels, GaugeF>,
    power: Family<Labels, GaugeF>,
    temp: Family<Labels, GaugeF>,
    sm_clock: Family<Labels, GaugeF>,
    mem_clock: Family<Labels, GaugeF>,
    xid: Family<Labels, GaugeF>,
    ecc_sbe: Family<Labels, Total>,
    ecc_dbe: Family<Labels, Total>,
    gr_engine_active: Family<Labels, GaugeF>,
}

fn set(f: &Family<Labels, GaugeF>, l: &Labels, v: f64) {
    f.get_or_create(l).set(v);
}

fn set_total(f: &Family<Labels, Total>, l: &Labels, v: u64) {
    f.get_or_create(l).0.store(v, Ordering::Relaxed);
}

/// `help` without its final period: the registry adds one.
fn register(reg: &mut Registry, name: &str, help: &str, metric: impl prometheus_client::registry::Metric) {
    reg.register(name, help.strip_suffix('.').unwrap_or(help), metric);
}

fn labels(pairs: Vec<(&'static str, &str)>) -> Labels {
    pairs.into_iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| (k, v.to_string())).collect()
}

fn gpu_labels<'a>(node: &'a str, g: &'a GpuSample, device: &'a str, gpu: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("gpu", gpu),
        ("UUID", &g.uuid),
        ("device", device),
        ("modelName", &g.name),
        ("Hostname", node),
        ("pci_bus_id", g.pci_bus_id.as_deref().unwrap_or("")),
    ]
}

fn with_pod<'a>(mut l: Vec<(&'static str, &'a str)>, pod: Option<&'a PodRef>) -> Vec<(&'static str, &'a str)> {
    if let Some(p) = pod {
        l.push(("pod", p.name.as_deref().unwrap_or("")));
        l.push(("namespace", p.namespace.as_deref().unwrap_or("")));
        l.push(("container", p.container.as_deref().unwrap_or("")));
    }
    l
}

pub fn render(sample: &NodeSample, stats: SelfStats) -> String {
    let f = Families {
        gpu_util: Family::default(),
        mem_copy_util: Family::default(),
        fb_used: Family::default(),
        fb_free: Family::default(),
        power: Family::default(),
        temp: Family::default(),
        sm_clock: Family::default(),
        mem_clock: Family::default(),
        xid: Family::default(),
        ecc_sbe: Family::default(),
        ecc_dbe: Family::default(),
        gr_engine_active: Family::default(),
    };
    let node = sample.node.as_str();
    for g in &sample.gpus {
        let gpu = g.index.to_string();
        let device = format!("nvidia{}", g.index);
        let base = gpu_labels(node, g, &device, &gpu);
        // One series per pod on the whole GPU, as dcgm-exporter -k does; none: no pod labels.
        // The pods the kubelet gave the GPU when the agent can ask it (as dcgm-exporter
        // does), else the pods whose processes run there.
        let whole_pods: Vec<Option<&PodRef>> = {
            let mut v: Vec<Option<&PodRef>> = match &g.allocated_to {
                Some(pods) => pods.iter().map(Some).collect(),
                None => g
                    .processes
                    .iter()
                    .filter(|p| p.gpu_instance_id.is_none())
                    .filter_map(|p| p.pod.as_ref())
                    .map(Some)
                    .collect(),
            };
            let key = |p: &Option<&PodRef>| p.map(|p| (p.namespace.clone(), p.name.clone(), p.uid.clone()));
            let mut seen = Vec::new();
            v.retain(|p| {
                let k = key(p);
                let new = !seen.contains(&k);
                seen.push(k);
                new
            });
            if v.is_empty() {
                v.push(None);
            }
            v
        };
        for pod in &whole_pods {
            let l = labels(with_pod(base.clone(), *pod));
            if let Some(u) = g.util_gpu {
                set(&f.gpu_util, &l, u as f64);
            }
            if let Some(u) = g.util_memory {
                set(&f.mem_copy_util, &l, u as f64);
            }
            if !g.mig_enabled {
                set(&f.fb_used, &l, g.memory_used_mib as f64);
                set(&f.fb_free, &l, g.memory_total_mib.saturating_sub(g.memory_used_mib) as f64);
            }
            if let Some(p) = g.power_mw {
                set(&f.power, &l, p as f64 / 1000.0);
            }
            if let Some(t) = g.temp_c {
                set(&f.temp, &l, t as f64);
            }
            if let Some(c) = g.sm_clock_mhz {
                set(&f.sm_clock, &l, c as f64);
            }
            if let Some(c) = g.mem_clock_mhz {
                set(&f.mem_clock, &l, c as f64);
            }
            set(&f.xid, &l, g.last_xid.as_ref().map(|x| x.code as f64).unwrap_or(0.0));
            if let Some(e) = g.ecc_corrected {
                set_total(&f.ecc_sbe, &l, e);
            }
            if let Some(e) = g.ecc_uncorrected {
                set_total(&f.ecc_dbe, &l, e);
            }
        }
        for m in &g.mig_instances {
            let gi = m.gpu_instance_id.to_string();
            let pod = match &m.allocated_to {
                Some(pods) => pods.first(),
                None => g
                    .processes
                    .iter()
                    .find(|p| p.gpu_instance_id == Some(m.gpu_instance_id))
                    .and_then(|p| p.pod.as_ref()),
            };
            let mut l = base.clone();
            l.push(("GPU_I_PROFILE", &m.profile));
            l.push(("GPU_I_ID", &gi));
            let l = labels(with_pod(l, pod));
            set(&f.fb_used, &l, m.memory_used_mib as f64);
            set(&f.fb_free, &l, m.memory_total_mib.saturating_sub(m.memory_used_mib) as f64);
            if let Some(u) = m.util {
                set(&f.gr_engine_active, &l, u as f64 / 100.0);
            }
        }
    }
    let mut reg = Registry::default();
    let r = &mut reg;
    register(r, "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", f.gpu_util);
    register(r, "DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", f.mem_copy_util);
    register(r, "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", f.fb_used);
    register(r, "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", f.fb_free);
    register(r, "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", f.power);
    register(r, "DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", f.temp);
    register(r, "DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", f.sm_clock);
    register(r, "DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", f.mem_clock);
    register(r, "DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", f.xid);
    register(r, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.", f.ecc_sbe);
    register(r, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.", f.ecc_dbe);
    register(r, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", f.gr_engine_active);
    let host: Labels = labels(vec![("Hostname", node)]);
    // The crate's own counter: registered as the family `fabrik_agent_samples`, its series
    // is `fabrik_agent_samples_total` (the OpenMetrics convention, which Prometheus reads).
    let samples: Family<Labels, Counter> = Family::default();
    samples.get_or_create(&host).inc_by(stats.samples_total);
    register(r, "fabrik_agent_samples", "Sample sets taken since the agent started.", samples);
    let took: Family<Labels, GaugeF> = Family::default();
    set(&took, &host, stats.sample_seconds);
    register(r, "fabrik_agent_sample_duration_seconds", "How long the last sample set took.", took);
    let readers: Family<Labels, Gauge> = Family::default();
    readers.get_or_create(&host).set(i64::try_from(stats.stream_readers).unwrap_or(i64::MAX));
    register(r, "fabrik_agent_stream_readers", "Connected /v1/stream readers.", readers);
    let mut out = String::new();
    // The 0.0.4 text format (what the agent serves) has no `# EOF` line: the registry only.
    if let Err(e) = prometheus_client::encoding::text::encode_registry(&mut out, &reg) {
        out = format!("# fabrik agent: cannot write the metrics: {e}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::backend::Gpus;
    use crate::agent::fake::FakeGpus;

    #[test]
    fn every_line_is_valid_exposition() {
        let s = FakeGpus::new("gpu-node-1", 4, 1).sample(120_000).unwrap();
        let text = render(&s, SelfStats::default());
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        };
        let mut series = 0;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# ") {
                assert!(rest.starts_with("HELP ") || rest.starts_with("TYPE "), "{line}");
                continue;
            }
            let (name, rest) = line.split_once('{').expect("labels");
            assert!(name_ok(name), "bad metric name in {line}");
            let (labels, value) = rest.rsplit_once("} ").expect("value");
            assert!(value.parse::<f64>().is_ok(), "bad value in {line}");
            for pair in labels.split("\",").filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once("=\"").expect("k=\"v\"");
                assert!(name_ok(k), "bad label {k} in {line}");
                assert!(!v.trim_end_matches('"').contains('\n'));
            }
            series += 1;
        }
        assert!(series > 40, "{text}");
        assert!(text.contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-"), "{text}");
        assert!(text.contains("modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-node-1\""), "{text}");
        assert!(text.contains("GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\""), "{text}");
        assert!(text.contains("namespace=\"inference-prod\""), "{text}");
        assert!(text.contains("DCGM_FI_DEV_XID_ERRORS{gpu=\"0\""), "{text}");
        // No GPU utilisation for the MIG GPU: NVML does not report it there.
        assert!(!text.lines().any(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{gpu=\"1\"")), "{text}");
    }

    #[test]
    fn pod_labels_come_from_the_kubelet_when_the_agent_can_ask_it() {
        let mut s = FakeGpus::new("gpu-node-1", 4, 1).sample(120_000).unwrap();
        // GPU 3 runs nothing (the fake's free GPU); the kubelet says a notebook holds it.
        let uuid = s.gpus[3].uuid.clone();
        let row = crate::agent::podres::Assignment {
            namespace: "notebooks".into(),
            pod: "jupyter-ada".into(),
            container: "nb".into(),
            resource: "nvidia.com/gpu".into(),
            device_id: uuid,
        };
        crate::agent::podres::apply(&mut s, &[row]);
        let text = render(&s, SelfStats::default());
        let line = text.lines().find(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{gpu=\"3\"")).expect("GPU 3's series");
        assert!(line.contains("pod=\"jupyter-ada\",namespace=\"notebooks\",container=\"nb\""), "{line}");
        // GPU 0: the kubelet names nobody, so its process's pod is not claimed either.
        let line = text.lines().find(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"")).expect("GPU 0's series");
        assert!(!line.contains("pod="), "{line}");
    }

    #[test]
    fn label_values_are_escaped_and_empty_ones_left_out() {
        let mut s = FakeGpus::new("gpu-node-1", 4, 1).sample(120_000).unwrap();
        s.gpus[3].allocated_to = Some(vec![PodRef {
            uid: String::new(),
            namespace: Some("a\"b\\c\nd".into()),
            name: Some("x\"y".into()),
            container_id: None,
            container: Some(String::new()),
        }]);
        let text = render(&s, SelfStats::default());
        let line = text.lines().find(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{gpu=\"3\"")).expect("GPU 3's series");
        assert!(line.contains(",pod=\"x\\\"y\",namespace=\"a\\\"b\\\\c\\nd\"}"), "{line}");
        assert!(!line.contains("container="), "{line}");
    }

    #[test]
    fn names_help_and_types_are_as_dcgm_exporter_writes_them() {
        let s = FakeGpus::new("gpu-node-1", 4, 1).sample(120_000).unwrap();
        let text = render(&s, SelfStats { samples_total: 7, sample_seconds: 0.25, stream_readers: 2 });
        for want in [
            "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n",
            "# HELP DCGM_FI_DEV_ECC_SBE_VOL_TOTAL Total number of single-bit volatile ECC errors.\n\
             # TYPE DCGM_FI_DEV_ECC_SBE_VOL_TOTAL counter\nDCGM_FI_DEV_ECC_SBE_VOL_TOTAL{gpu=\"",
            "\nDCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu=\"0\",",
            "# HELP fabrik_agent_samples Sample sets taken since the agent started.\n\
             # TYPE fabrik_agent_samples counter\nfabrik_agent_samples_total{Hostname=\"gpu-node-1\"} 7\n",
            "fabrik_agent_sample_duration_seconds{Hostname=\"gpu-node-1\"} 0.25\n",
            "# TYPE fabrik_agent_stream_readers gauge\nfabrik_agent_stream_readers{Hostname=\"gpu-node-1\"} 2\n",
        ] {
            assert!(text.contains(want), "{want:?} in:\n{text}");
        }
        assert!(!text.contains("_total_total") && !text.contains("_TOTAL_total") && !text.contains(".."), "{text}");
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
        // A family with no series (no MIG instance reports utilisation here) has no HELP line.
        let families = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        let named = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        assert_eq!(families, named);
    }
}
