//! `/metrics`: a sample set in the Prometheus text format (0.0.4) with dcgm-exporter's
//! metric names and labels, so an existing Prometheus and its dashboards scrape the agent
//! unchanged (protocols.md §6).

use std::fmt::Write;

use super::wire::{GpuSample, NodeSample, PodRef};

/// The agent's own counters, rendered after the GPU series.
#[derive(Clone, Copy, Debug, Default)]
pub struct SelfStats {
    pub samples_total: u64,
    pub sample_seconds: f64,
    pub stream_readers: u64,
}

/// Escapes a label value: backslash, double quote and newline.
pub fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    lines: Vec<String>,
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let body: Vec<String> =
        pairs.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    format!("{{{}}}", body.join(","))
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
    let fams: &[(&str, &str, &str)] = &[
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge"),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "gauge"),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge"),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge"),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge"),
        ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge"),
        ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge"),
        ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "gauge"),
        ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge"),
        ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.", "counter"),
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.", "counter"),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", "gauge"),
    ];
    let mut families: Vec<Family> =
        fams.iter().map(|(name, help, kind)| Family { name, help, kind, lines: Vec::new() }).collect();
    let mut push = |name: &str, l: &[(&str, &str)], v: f64| {
        if let Some(f) = families.iter_mut().find(|f| f.name == name) {
            f.lines.push(format!("{name}{} {v}", labels(l)));
        }
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
            let l = with_pod(base.clone(), *pod);
            if let Some(u) = g.util_gpu {
                push("DCGM_FI_DEV_GPU_UTIL", &l, u as f64);
            }
            if let Some(u) = g.util_memory {
                push("DCGM_FI_DEV_MEM_COPY_UTIL", &l, u as f64);
            }
            if !g.mig_enabled {
                push("DCGM_FI_DEV_FB_USED", &l, g.memory_used_mib as f64);
                push("DCGM_FI_DEV_FB_FREE", &l, g.memory_total_mib.saturating_sub(g.memory_used_mib) as f64);
            }
            if let Some(p) = g.power_mw {
                push("DCGM_FI_DEV_POWER_USAGE", &l, p as f64 / 1000.0);
            }
            if let Some(t) = g.temp_c {
                push("DCGM_FI_DEV_GPU_TEMP", &l, t as f64);
            }
            if let Some(c) = g.sm_clock_mhz {
                push("DCGM_FI_DEV_SM_CLOCK", &l, c as f64);
            }
            if let Some(c) = g.mem_clock_mhz {
                push("DCGM_FI_DEV_MEM_CLOCK", &l, c as f64);
            }
            push("DCGM_FI_DEV_XID_ERRORS", &l, g.last_xid.as_ref().map(|x| x.code as f64).unwrap_or(0.0));
            if let Some(e) = g.ecc_corrected {
                push("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", &l, e as f64);
            }
            if let Some(e) = g.ecc_uncorrected {
                push("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", &l, e as f64);
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
            let l = with_pod(l, pod);
            push("DCGM_FI_DEV_FB_USED", &l, m.memory_used_mib as f64);
            push("DCGM_FI_DEV_FB_FREE", &l, m.memory_total_mib.saturating_sub(m.memory_used_mib) as f64);
            if let Some(u) = m.util {
                push("DCGM_FI_PROF_GR_ENGINE_ACTIVE", &l, u as f64 / 100.0);
            }
        }
    }
    let mut out = String::new();
    for f in families.iter().filter(|f| !f.lines.is_empty()) {
        let _ = writeln!(out, "# HELP {} {}\n# TYPE {} {}", f.name, f.help, f.name, f.kind);
        for l in &f.lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    let host = labels(&[("Hostname", node)]);
    let _ = writeln!(out, "# HELP fabrik_agent_samples_total Sample sets taken since the agent started.");
    let _ = writeln!(
        out,
        "# TYPE fabrik_agent_samples_total counter\nfabrik_agent_samples_total{host} {}",
        stats.samples_total
    );
    let _ = writeln!(out, "# HELP fabrik_agent_sample_duration_seconds How long the last sample set took.");
    let _ = writeln!(
        out,
        "# TYPE fabrik_agent_sample_duration_seconds gauge\nfabrik_agent_sample_duration_seconds{host} {}",
        stats.sample_seconds
    );
    let _ = writeln!(out, "# HELP fabrik_agent_stream_readers Connected /v1/stream readers.");
    let _ = writeln!(
        out,
        "# TYPE fabrik_agent_stream_readers gauge\nfabrik_agent_stream_readers{host} {}",
        stats.stream_readers
    );
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
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(labels(&[("pod", "x\"y"), ("container", "")]), "{pod=\"x\\\"y\"}");
    }
}
