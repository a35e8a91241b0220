//! The NVML backend of `fabrik agent`: reads every GPU, MIG instance, GPU process and
//! NvLink on the node through nvml-wrapper, and watches XID events on its own thread.
//!
//! Strictly read-only: no `set_*` call, no MIG mode or instance changes. Every per-field
//! NVML call that fails (NotSupported in MIG mode, no permission, old driver) becomes
//! `None`/empty for that field; only a failure to enumerate devices fails the sample.
//! libnvidia-ml is dlopened at `Nvml::init()`, so this builds and links without a driver.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, P2pCapabilitiesIndex, P2pStatus, TemperatureSensor, TopologyLevel,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;

use super::backend::{BackendError, Gpus};
use super::gpm::MigActivity;
use super::procmap;
use super::wire::{GpuProcess, GpuSample, MigSample, NodeSample, NvLinkState, PeerLink, WIRE_VERSION, XidEvent};

const MIB: u64 = 1024 * 1024;
/// Bound on the NvLink scan; the loop stops at the first error anyway (NVML_NVLINK_MAX_LINKS
/// is 18 today), this only guards against a driver that never errors.
const MAX_NVLINKS: u32 = 32;
/// How long the XID thread blocks in `EventSet::wait` before checking for shutdown.
const XID_WAIT_MS: u32 = 1000;
/// XID 48 is the driver's "double bit ECC error"; a DBE event carries no XID number, so it
/// is recorded under that code.
const XID_DBE: u64 = 48;
/// nvmlReturn_t success.
const NVML_SUCCESS: u32 = 0;

/// Last XID per GPU uuid, written by the XID thread and read by `sample`.
pub type XidTable = Arc<Mutex<HashMap<String, XidEvent>>>;

pub struct NvmlGpus {
    nvml: Arc<Nvml>,
    node: String,
    proc_root: PathBuf,
    /// Where the host's runtime state is mounted (`/host` in the DaemonSet), for pod names.
    host_root: PathBuf,
    xids: XidTable,
    /// Each MIG GPU instance's previous GPM sample, for its engine activity.
    gpm: RefCell<MigActivity>,
    /// The GPU-to-GPU paths, read once per GPU (they change only with the hardware).
    peers: RefCell<HashMap<u32, Vec<PeerLink>>>,
    stop: Arc<AtomicBool>,
    xid_thread: Option<JoinHandle<()>>,
}

/// Initialise NVML and start the XID watcher. Reads /proc from `/host/proc` when it exists
/// (the DaemonSet mounts the host's /proc there), else `/proc`.
pub fn open(node: &str) -> Result<NvmlGpus, BackendError> {
    let host = Path::new("/host/proc");
    let proc_root = if host.is_dir() { host.to_path_buf() } else { PathBuf::from("/proc") };
    open_with_proc_root(node, proc_root)
}

/// As [`open`], with an explicit proc root for the PID → pod mapping.
pub fn open_with_proc_root(node: &str, proc_root: PathBuf) -> Result<NvmlGpus, BackendError> {
    let nvml = Arc::new(Nvml::init().map_err(init_error)?);
    let xids: XidTable = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let xid_thread = {
        let (nvml, xids, stop) = (Arc::clone(&nvml), Arc::clone(&xids), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("nvml-xid".into())
            .spawn(move || xid_loop(&nvml, &xids, &stop))
            .map_err(|e| eprintln!("fabrik agent: nvml: cannot start the XID thread ({e}); XIDs will not be reported"))
            .ok()
    };
    // The DaemonSet mounts the host's /proc at /host/proc and the runtimes' state under
    // /host/run; run on the host itself, both are at /.
    let host_root = match proc_root.parent() {
        Some(p) if proc_root.ends_with("proc") && p != Path::new("/") => p.to_path_buf(),
        _ => PathBuf::from("/"),
    };
    Ok(NvmlGpus {
        nvml,
        node: node.to_string(),
        proc_root,
        host_root,
        xids,
        gpm: RefCell::default(),
        peers: RefCell::default(),
        stop,
        xid_thread,
    })
}

/// How far back the per-process utilisation samples are read (µs).
const PROC_UTIL_PERIOD_US: u64 = 5_000_000;

/// `Nvml::init` errors: no library or no kernel driver means "no driver" (the message
/// names `--fake`); anything else is a real NVML failure worth showing as such.
pub fn init_error(e: NvmlError) -> BackendError {
    match e {
        NvmlError::LibloadingError(inner) => BackendError::NoDriver(inner.to_string()),
        NvmlError::DriverNotLoaded => {
            BackendError::NoDriver("libnvidia-ml is present but the NVIDIA kernel driver is not loaded".into())
        }
        other => BackendError::Nvml(other.to_string()),
    }
}

impl Drop for NvmlGpus {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The thread wakes within XID_WAIT_MS; joining keeps the EventSet from outliving
        // nvmlShutdown (the thread holds its own Arc<Nvml>, so this is belt and braces).
        if let Some(t) = self.xid_thread.take() {
            let _ = t.join();
        }
    }
}

impl Gpus for NvmlGpus {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn sample(&mut self, now_ms: u64) -> Result<NodeSample, BackendError> {
        let count = self.nvml.device_count().map_err(|e| BackendError::Nvml(format!("device_count: {e}")))?;
        // Copy the table so the XID thread is never blocked behind a slow sample.
        let xids = self.xids.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let mut gpus = Vec::with_capacity(count as usize);
        self.gpm.borrow_mut().begin();
        for index in 0..count {
            match self.nvml.device_by_index(index) {
                Ok(dev) => gpus.push(self.gpu_sample(index, &dev, &xids)),
                // A lost/unreadable GPU is left out rather than failing the whole node.
                Err(e) => eprintln!("fabrik agent: nvml: GPU {index}: {e}; left out of this sample"),
            }
        }
        self.gpm.borrow_mut().end();
        Ok(NodeSample {
            version: WIRE_VERSION,
            node: self.node.clone(),
            sampled_at_ms: now_ms,
            backend: "nvml".into(),
            driver_version: self.nvml.sys_driver_version().ok(),
            cuda_driver_version: self.nvml.sys_cuda_driver_version().ok().map(cuda_version_string),
            gpus,
        })
    }
}

impl NvmlGpus {
    fn gpu_sample(&self, index: u32, dev: &Device<'_>, xids: &HashMap<String, XidEvent>) -> GpuSample {
        // Empty when NVML cannot read it; the index still identifies the GPU.
        let uuid = dev.uuid().unwrap_or_default();
        let (memory_total_mib, memory_used_mib) =
            dev.memory_info().map(|m| (m.total / MIB, m.used / MIB)).unwrap_or((0, 0));
        // NotSupported on a MIG-enabled GPU: utilisation is per instance there.
        let util = dev.utilization_rates().ok();
        let mig = dev.mig_mode().ok();
        let mig_enabled = mig.as_ref().is_some_and(|m| m.current == 1);
        // GPM's memory of the previous sample is keyed by the GPU (its index if NVML has
        // no uuid for it).
        let gpm_key = if uuid.is_empty() { format!("gpu#{index}") } else { uuid.clone() };
        let mig_instances = if mig_enabled { self.mig_instances(dev, &gpm_key) } else { Vec::new() };
        GpuSample {
            index,
            name: dev.name().unwrap_or_default(),
            pci_bus_id: dev.pci_info().ok().map(|p| p.bus_id),
            memory_total_mib,
            memory_used_mib,
            util_gpu: util.as_ref().map(|u| u.gpu),
            util_memory: util.as_ref().map(|u| u.memory),
            power_mw: dev.power_usage().ok(),
            power_limit_mw: dev.enforced_power_limit().ok(),
            temp_c: dev.temperature(TemperatureSensor::Gpu).ok(),
            sm_clock_mhz: dev.clock_info(Clock::SM).ok(),
            mem_clock_mhz: dev.clock_info(Clock::Memory).ok(),
            ecc_corrected: dev.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile).ok(),
            ecc_uncorrected: dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile).ok(),
            throttle_reasons: dev.current_throttle_reasons().map(throttle_names).unwrap_or_default(),
            last_xid: xids.get(&uuid).cloned(),
            mig_enabled,
            mig_pending: mig.map(|m| m.pending == 1),
            processes: self.processes(dev, mig_enabled),
            nvlinks: nvlinks(dev),
            allocated_to: None,
            peers: self.peers(index, dev),
            mig_instances,
            uuid,
        }
    }

    /// How GPU `index` reaches every other GPU (`nvidia-smi topo -m`): NVLinks whose far
    /// end is that GPU, or, where NVML says the pair talks over NVLink but the links end at
    /// NVSwitches, all of this GPU's active links; and the PCIe common ancestor. Read once.
    fn peers(&self, index: u32, dev: &Device<'_>) -> Vec<PeerLink> {
        if let Some(p) = self.peers.borrow().get(&index) {
            return p.clone();
        }
        let links = nvlinks(dev);
        let active = links.iter().filter(|l| l.active).count() as u32;
        let mut out = Vec::new();
        for peer in 0..self.nvml.device_count().unwrap_or(0) {
            if peer == index {
                continue;
            }
            let Ok(other) = self.nvml.device_by_index(peer) else { continue };
            let bus = other.pci_info().ok().map(|p| p.bus_id);
            let direct = links
                .iter()
                .filter(|l| l.active && l.remote_pci_bus_id.is_some() && l.remote_pci_bus_id == bus)
                .count() as u32;
            let nvlinks = if direct > 0 {
                direct
            } else if matches!(dev.p2p_status(&other, P2pCapabilitiesIndex::NvLink), Ok(P2pStatus::Ok)) {
                active
            } else {
                0
            };
            let Ok(other) = self.nvml.device_by_index(peer) else { continue };
            let path = match dev.topology_common_ancestor(other) {
                Ok(TopologyLevel::Internal) => "X",
                Ok(TopologyLevel::Single) => "PIX",
                Ok(TopologyLevel::Multiple) => "PXB",
                Ok(TopologyLevel::HostBridge) => "PHB",
                Ok(TopologyLevel::Node) => "NODE",
                Ok(TopologyLevel::System) => "SYS",
                Err(_) => "?",
            };
            out.push(PeerLink { peer, nvlinks, path: path.into() });
        }
        self.peers.borrow_mut().insert(index, out.clone());
        out
    }

    /// MIG devices occupy slots 0..mig_device_count() (the maximum); empty slots error
    /// with NotFound and are skipped.
    fn mig_instances(&self, parent: &Device<'_>, parent_uuid: &str) -> Vec<MigSample> {
        let max = parent.mig_device_count().unwrap_or(0);
        let mut out = Vec::new();
        for slot in 0..max {
            let Ok(mig) = parent.mig_device_by_index(slot) else { continue };
            let gi = raw_gpu_instance_id(&self.nvml, &mig);
            let gi_info = gi.and_then(|id| raw_gpu_instance_info(&self.nvml, parent, id));
            let profile = mig
                .name()
                .ok()
                .and_then(|n| profile_from_device_name(&n))
                .or_else(|| {
                    let (profile_id, _, _) = gi_info?;
                    let p = parent.profile_info(profile_id).ok()?;
                    Some(profile_name(p.slice_count, p.memory_size_mb, profile_id))
                })
                .or_else(|| {
                    let a = mig.attributes().ok()?;
                    Some(profile_name(a.gpu_instance_slice_count, a.memory_size_mb, 0))
                })
                .unwrap_or_default();
            let (total, used) = mig.memory_info().map(|m| (m.total / MIB, m.used / MIB)).unwrap_or((0, 0));
            let (placement_start, placement_size) = gi_info.map(|(_, s, n)| (s, n)).unwrap_or((0, 0));
            out.push(MigSample {
                uuid: mig.uuid().unwrap_or_default(),
                profile,
                // u32::MAX marks "unknown" (the field is not optional on the wire); real
                // GI ids are small.
                gpu_instance_id: gi.unwrap_or(u32::MAX),
                compute_instance_id: raw_compute_instance_id(&self.nvml, &mig),
                placement_start,
                placement_size,
                memory_total_mib: total,
                memory_used_mib: used,
                // GPU utilisation is NotSupported on MIG: engine activity from GPM since
                // the previous sample (Hopper and newer; `None` on the first and elsewhere).
                util: gi.and_then(|id| self.gpm.borrow_mut().activity(&self.nvml, parent, parent_uuid, id)),
                allocated_to: None,
            });
        }
        out
    }

    /// Compute processes of the GPU. In MIG mode the parent's list is complete only for
    /// privileged callers, so each MIG device is asked too and the union is kept.
    fn processes(&self, dev: &Device<'_>, mig_enabled: bool) -> Vec<GpuProcess> {
        let mut out: Vec<GpuProcess> = Vec::new();
        let mut push = |p: nvml_wrapper::struct_wrappers::device::ProcessInfo, gi: Option<u32>, ci: Option<u32>| {
            let gpu_instance_id = p.gpu_instance_id.or(gi);
            let compute_instance_id = p.compute_instance_id.or(ci);
            if out.iter().any(|q| {
                q.pid == p.pid && q.gpu_instance_id == gpu_instance_id && q.compute_instance_id == compute_instance_id
            }) {
                return;
            }
            out.push(GpuProcess {
                pid: p.pid,
                used_memory_mib: match p.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => Some(bytes / MIB),
                    UsedGpuMemory::Unavailable => None,
                },
                gpu_instance_id,
                compute_instance_id,
                pod: procmap::pod_of_pid(&self.proc_root, p.pid).map(|pod| procmap::with_names(&self.host_root, pod)),
                sm_util: None,
            });
        };
        for p in dev.running_compute_processes().unwrap_or_default() {
            push(p, None, None);
        }
        if mig_enabled {
            for slot in 0..dev.mig_device_count().unwrap_or(0) {
                let Ok(mig) = dev.mig_device_by_index(slot) else { continue };
                let gi = raw_gpu_instance_id(&self.nvml, &mig);
                let ci = raw_compute_instance_id(&self.nvml, &mig);
                for p in mig.running_compute_processes().unwrap_or_default() {
                    push(p, gi, ci);
                }
            }
        }
        // Per-process SM utilisation: the driver's samples of the last few seconds, the
        // newest per pid. NVML returns only processes with a non-zero sample in the period
        // (NotFound when none has one), so a running process it leaves out kept the SMs at
        // 0 % — how an idle share shows. Not supported in MIG mode (GPM measures the
        // instances there); any other error: unknown.
        if !mig_enabled && !out.is_empty() {
            let since_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64)
                .saturating_sub(PROC_UTIL_PERIOD_US);
            let samples = match dev.process_utilization_stats(since_us) {
                Ok(v) => Some(v),
                Err(NvmlError::NotFound) => Some(Vec::new()),
                Err(_) => None,
            };
            if let Some(samples) = samples {
                let mut newest: Vec<(u32, u64, u32)> = Vec::new();
                for s in samples {
                    match newest.iter_mut().find(|(pid, _, _)| *pid == s.pid) {
                        Some(n) if n.1 < s.timestamp => *n = (s.pid, s.timestamp, s.sm_util),
                        Some(_) => {}
                        None => newest.push((s.pid, s.timestamp, s.sm_util)),
                    }
                }
                for p in &mut out {
                    let util = newest.iter().find(|(pid, _, _)| *pid == p.pid).map_or(0, |n| n.2);
                    p.sm_util = Some(util.min(100) as u8);
                }
            }
        }
        out
    }
}

/// NvLinks 0.. until the first error (NotSupported/InvalidArg past the last link).
fn nvlinks(dev: &Device<'_>) -> Vec<NvLinkState> {
    let mut out = Vec::new();
    for link in 0..MAX_NVLINKS {
        let l = dev.link_wrapper_for(link);
        let Ok(active) = l.is_active() else { break };
        let remote_pci_bus_id = if active { l.remote_pci_info().ok().map(|p| p.bus_id) } else { None };
        out.push(NvLinkState { link, active, remote_pci_bus_id });
    }
    out
}

/// Snake-case names of the active throttle reasons. Written out rather than derived from
/// the bitflags names so the wire strings stay stable across wrapper versions.
pub fn throttle_names(r: ThrottleReasons) -> Vec<String> {
    const NAMES: &[(ThrottleReasons, &str)] = &[
        (ThrottleReasons::GPU_IDLE, "gpu_idle"),
        (ThrottleReasons::APPLICATIONS_CLOCKS_SETTING, "applications_clocks_setting"),
        (ThrottleReasons::SW_POWER_CAP, "sw_power_cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw_slowdown"),
        (ThrottleReasons::SYNC_BOOST, "sync_boost"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
        (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake_slowdown"),
        (ThrottleReasons::DISPLAY_CLOCK_SETTING, "display_clock_setting"),
    ];
    NAMES.iter().filter(|(flag, _)| r.contains(*flag)).map(|(_, n)| (*n).to_string()).collect()
}

/// `nvmlSystemGetCudaDriverVersion` gives 1000*major + 10*minor, e.g. 12040 → "12.4".
pub fn cuda_version_string(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// A MIG device's NVML name ends in its profile: "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
/// or "... MIG 1c.3g.40gb" when the compute instance is smaller than the GPU instance.
/// Returns the GPU-instance profile ("3g.40gb", "1g.10gb+me").
pub fn profile_from_device_name(name: &str) -> Option<String> {
    let (_, tail) = name.rsplit_once("MIG ")?;
    let tail = tail.trim();
    // Drop a leading "<n>c." compute-instance part.
    let tail = match tail.split_once('.') {
        Some((head, rest)) if head.ends_with('c') && head[..head.len() - 1].bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => tail,
    };
    let (slices, rest) = tail.split_once("g.")?;
    (!slices.is_empty() && slices.bytes().all(|b| b.is_ascii_digit()) && rest.contains("gb")).then(|| tail.to_string())
}

/// The profile name NVIDIA prints, rebuilt from the profile's slice count and memory:
/// memory is rounded up to whole GB (9856 MB → "10gb", 40192 MB → "40gb"), and the profile
/// id's variant adds the suffix. Used only when the device name does not carry it.
pub fn profile_name(slice_count: u32, memory_size_mb: u64, profile_id: u32) -> String {
    // NVML_GPU_INSTANCE_PROFILE_* ids (nvml.h); the plain ids 0..=6 have no suffix.
    let suffix = match profile_id {
        7 | 8 => "+me",       // *_SLICE_REV1: with a media extension
        10..=12 => "+gfx",    // *_SLICE_GFX
        13 | 14 => "-me",     // *_SLICE_NO_ME
        15 | 16 => "+me.all", // *_SLICE_ALL_ME
        _ => "",              // includes 9 (1_SLICE_REV2, e.g. 1g.20gb)
    };
    format!("{slice_count}g.{}gb{suffix}", memory_size_mb.div_ceil(1024))
}

/// `nvmlDeviceGetGpuInstanceId` on a MIG device handle: not wrapped by nvml-wrapper 0.13,
/// so called through the loaded library. The symbol is checked first (calling a missing
/// symbol through the wrapper's methods would panic).
fn raw_gpu_instance_id(nvml: &Nvml, mig: &Device<'_>) -> Option<u32> {
    let f = nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref().ok()?;
    let mut id: u32 = 0;
    // SAFETY: the handle is a live MIG device handle from this Nvml; `id` is a valid out pointer.
    let rc = unsafe { f(mig.handle(), &mut id) };
    (rc == NVML_SUCCESS).then_some(id)
}

/// `nvmlDeviceGetComputeInstanceId` on a MIG device handle (see above).
fn raw_compute_instance_id(nvml: &Nvml, mig: &Device<'_>) -> Option<u32> {
    let f = nvml.lib().nvmlDeviceGetComputeInstanceId.as_ref().ok()?;
    let mut id: u32 = 0;
    // SAFETY: as in raw_gpu_instance_id.
    let rc = unsafe { f(mig.handle(), &mut id) };
    (rc == NVML_SUCCESS).then_some(id)
}

/// (profile id, placement start, placement size) of GPU instance `gi_id` on `parent`, via
/// `nvmlDeviceGetGpuInstanceById` + `nvmlGpuInstanceGetInfo` (read-only; not wrapped).
/// May need privileges on some drivers; `None` then.
fn raw_gpu_instance_info(nvml: &Nvml, parent: &Device<'_>, gi_id: u32) -> Option<(u32, u32, u32)> {
    let lib = nvml.lib();
    let by_id = lib.nvmlDeviceGetGpuInstanceById.as_ref().ok()?;
    let get_info = lib.nvmlGpuInstanceGetInfo.as_ref().ok()?;
    let mut gi = std::ptr::null_mut();
    // SAFETY: live parent handle; `gi` is a valid out pointer for the instance handle.
    let rc = unsafe { by_id(parent.handle(), gi_id, &mut gi) };
    if rc != NVML_SUCCESS || gi.is_null() {
        return None;
    }
    let mut info = std::mem::MaybeUninit::zeroed();
    // SAFETY: `gi` was just returned by NVML; `info` is a valid, zeroed out struct (all of
    // its fields are integers or a pointer, for which zero is valid).
    let rc = unsafe { get_info(gi, info.as_mut_ptr()) };
    if rc != NVML_SUCCESS {
        return None;
    }
    // SAFETY: zero-initialised and then filled by NVML.
    let info = unsafe { info.assume_init() };
    Some((info.profileId, info.placement.start, info.placement.size))
}

use crate::now_ms;

/// The XID watcher: one EventSet for all GPUs, registered for CRITICAL_XID_ERROR (and
/// DOUBLE_BIT_ECC_ERROR where the GPU supports it), waited on with a timeout so shutdown
/// is noticed. Registration that fails is logged once per GPU and that GPU is skipped.
fn xid_loop(nvml: &Nvml, xids: &XidTable, stop: &AtomicBool) {
    let count = match nvml.device_count() {
        Ok(n) => n,
        Err(e) => return eprintln!("fabrik agent: nvml: XID watcher: device_count: {e}; XIDs will not be reported"),
    };
    let Ok(mut set) = nvml.create_event_set() else {
        return eprintln!("fabrik agent: nvml: XID watcher: cannot create an event set; XIDs will not be reported");
    };
    // nvml-wrapper releases the set when a registration fails, losing the GPUs already in
    // it; so remember what succeeded and re-register those on a fresh set.
    let mut registered: Vec<(u32, EventTypes)> = Vec::new();
    for index in 0..count {
        let Ok(dev) = nvml.device_by_index(index) else { continue };
        let supported = dev.supported_event_types().unwrap_or(EventTypes::CRITICAL_XID_ERROR);
        let wanted = (EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR) & supported;
        if wanted.is_empty() {
            eprintln!("fabrik agent: nvml: GPU {index} supports no XID events; its XIDs will not be reported");
            continue;
        }
        match dev.register_events(wanted, set) {
            Ok(s) => {
                set = s;
                registered.push((index, wanted));
            }
            Err(e) => {
                eprintln!(
                    "fabrik agent: nvml: GPU {index}: XID registration failed ({e:?}); its XIDs will not be reported"
                );
                let Some(s) = reregister(nvml, &registered) else {
                    return eprintln!("fabrik agent: nvml: XID watcher: cannot rebuild the event set; stopping");
                };
                set = s;
            }
        }
    }
    if registered.is_empty() {
        return;
    }
    let mut logged_error = false;
    while !stop.load(Ordering::Relaxed) {
        match set.wait(XID_WAIT_MS) {
            Ok(ev) => {
                let code = if ev.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                    match ev.event_data {
                        Some(XidError::Value(code)) => code,
                        // The driver did not say which XID; nothing useful to record.
                        Some(XidError::Unknown) | None => continue,
                    }
                } else if ev.event_type.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
                    XID_DBE
                } else {
                    continue;
                };
                let Ok(uuid) = ev.device.uuid() else { continue };
                xids.lock().unwrap_or_else(PoisonError::into_inner).insert(uuid, XidEvent { code, at_ms: now_ms() });
            }
            Err(NvmlError::Timeout) => {}
            Err(e) => {
                if !logged_error {
                    eprintln!("fabrik agent: nvml: XID wait: {e}; retrying");
                    logged_error = true;
                }
                // Avoid a hot loop when the error repeats (e.g. GpuLost).
                std::thread::sleep(Duration::from_millis(u64::from(XID_WAIT_MS)));
            }
        }
    }
}

fn reregister<'n>(nvml: &'n Nvml, registered: &[(u32, EventTypes)]) -> Option<nvml_wrapper::EventSet<'n>> {
    let mut set = nvml.create_event_set().ok()?;
    for (index, wanted) in registered {
        set = nvml.device_by_index(*index).ok()?.register_events(*wanted, set).ok()?;
    }
    Some(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine has no libnvidia-ml: `open` must say "no driver" and point at `--fake`.
    /// On a GPU machine it opens instead, and a sample must succeed.
    #[test]
    fn open_without_driver_is_no_driver() {
        match open("test-node") {
            Err(BackendError::NoDriver(msg)) => {
                let shown = BackendError::NoDriver(msg).to_string();
                assert!(shown.contains("--fake"), "{shown}");
            }
            Err(other) => panic!("expected NoDriver, got {other}"),
            Ok(mut gpus) => {
                assert_eq!(gpus.name(), "nvml");
                let s = gpus.sample(1).expect("sample on a GPU machine");
                assert_eq!(s.backend, "nvml");
            }
        }
    }

    #[test]
    fn init_error_mapping() {
        assert!(matches!(init_error(NvmlError::DriverNotLoaded), BackendError::NoDriver(_)));
        assert!(init_error(NvmlError::DriverNotLoaded).to_string().contains("--fake"));
        assert!(matches!(init_error(NvmlError::NoPermission), BackendError::Nvml(_)));
    }

    #[test]
    fn cuda_versions() {
        assert_eq!(cuda_version_string(12040), "12.4");
        assert_eq!(cuda_version_string(11080), "11.8");
        assert_eq!(cuda_version_string(13000), "13.0");
    }

    #[test]
    fn throttle() {
        let r = ThrottleReasons::SW_POWER_CAP | ThrottleReasons::HW_SLOWDOWN;
        assert_eq!(throttle_names(r), vec!["sw_power_cap", "hw_slowdown"]);
        assert!(throttle_names(ThrottleReasons::NONE).is_empty());
    }

    #[test]
    fn profiles_from_names() {
        let cases = [
            ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", Some("1g.10gb")),
            ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", Some("3g.20gb")),
            ("NVIDIA A100-SXM4-80GB MIG 1g.10gb+me", Some("1g.10gb+me")),
            ("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb", Some("3g.20gb")),
            ("NVIDIA H200 MIG 7g.141gb", Some("7g.141gb")),
            ("NVIDIA H100 80GB HBM3", None),
            ("MIG ", None),
            ("MIG xg.", None),
            ("", None),
        ];
        for (name, want) in cases {
            assert_eq!(profile_from_device_name(name).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn profiles_from_sizes() {
        assert_eq!(profile_name(1, 9856, 0), "1g.10gb");
        assert_eq!(profile_name(7, 40192, 4), "7g.40gb");
        assert_eq!(profile_name(3, 40192, 2), "3g.40gb");
        assert_eq!(profile_name(1, 9856, 7), "1g.10gb+me");
        assert_eq!(profile_name(1, 4864, 0), "1g.5gb");
    }
}
