//! The audit log: one JSON object per line in `<data dir>/audit.jsonl`, appended and
//! fsync'd before the step it records goes on. An operation whose `confirmed` record
//! cannot be written does not start. `fabrik audit` reads it back, and marks operations
//! that were confirmed but never reached an outcome (quit, crash, lost connection) as
//! interrupted; each operation re-plans from the live cluster, so running one again is safe.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Plan;

pub const FILE_NAME: &str = "audit.jsonl";

/// What happened to an operation, in the order it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The person opened the preview: what was planned, from which state.
    Planned,
    /// The person confirmed: the operation starts.
    Confirmed,
    Step,
    /// A mutating API call is about to be sent (written before it goes, so a call in flight
    /// when the process dies is still in the log).
    Sending,
    Blocked,
    Log,
    Succeeded,
    Failed,
    Cancelled,
    /// Refused before anything was sent (read-only, RBAC, a blocked plan).
    Refused,
    /// The cockpit stopped while the operation ran (quit, a context switch, SIGHUP/SIGTERM):
    /// the message says at which step. Not an outcome: the operation did not finish.
    Interrupted,
}

impl Phase {
    pub fn is_outcome(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::Cancelled | Phase::Refused)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Planned => "planned",
            Phase::Confirmed => "confirmed",
            Phase::Step => "step",
            Phase::Sending => "sending",
            Phase::Blocked => "blocked",
            Phase::Log => "log",
            Phase::Succeeded => "succeeded",
            Phase::Failed => "failed",
            Phase::Cancelled => "cancelled",
            Phase::Refused => "refused",
            Phase::Interrupted => "interrupted",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// RFC 3339, UTC.
    pub time: String,
    /// Unique across sessions: `<session>-<n>`.
    pub op: String,
    /// The kube context (or `demo`).
    pub context: String,
    /// Who the API server says we are (SelfSubjectReview), when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    pub kind: String,
    pub target: String,
    pub phase: Phase,
    pub message: String,
    /// The preview as the person saw it (planned and confirmed records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "the audit log {path} cannot be written ({reason}); operations do not run without it: fix the directory's permissions or set FABRIK_DATA_DIR"
)]
pub struct AuditError {
    pub path: String,
    pub reason: String,
}

/// An append-only handle. Cheap to clone: each append opens, writes one line and syncs, so
/// two cockpits on one machine interleave whole lines.
#[derive(Clone, Debug)]
pub struct Audit {
    path: PathBuf,
    session: String,
    pub context: String,
    pub user: String,
}

impl Audit {
    /// The log in `data_dir`; the directory is created on first write.
    pub fn new(data_dir: &Path, context: &str) -> Audit {
        let session = format!("{}-{}", crate::now_ms(), std::process::id());
        Audit { path: data_dir.join(FILE_NAME), session, context: context.to_string(), user: String::new() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn op_key(&self, id: u64) -> String {
        format!("{}-{id}", self.session)
    }

    pub fn record(&self, id: u64, plan: &Plan, phase: Phase, message: &str) -> Result<(), AuditError> {
        let with_plan = matches!(phase, Phase::Planned | Phase::Confirmed);
        let r = Record {
            time: rfc3339(crate::now_ms()),
            op: self.op_key(id),
            context: self.context.clone(),
            user: self.user.clone(),
            kind: plan.kind.name().to_string(),
            target: plan.target.clone(),
            phase,
            message: message.to_string(),
            effects: if with_plan { plan.effects.clone() } else { Vec::new() },
            warnings: if with_plan { plan.warnings.clone() } else { Vec::new() },
        };
        self.append(&r)
    }

    pub fn append(&self, r: &Record) -> Result<(), AuditError> {
        let err = |e: std::io::Error| AuditError { path: self.path.display().to_string(), reason: e.to_string() };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let mut line = serde_json::to_string(r).map_err(|e| err(std::io::Error::other(e)))?;
        line.push('\n');
        let mut opts = OpenOptions::new();
        opts.create(true).append(true).read(true);
        // Who did what to which node is for the person and their admins: a new log is
        // readable by its owner only (an existing file keeps the mode it was given).
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&self.path).map_err(err)?;
        // A crash can leave a torn last line without its newline; start on a fresh line so
        // that torn line does not swallow this record too.
        if ends_torn(&mut f).map_err(err)? {
            line.insert(0, '\n');
        }
        f.write_all(line.as_bytes()).map_err(err)?;
        f.sync_data().map_err(err)
    }
}

/// Whether the file is non-empty and its last byte is not a newline.
fn ends_torn(f: &mut File) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    if f.metadata()?.len() == 0 {
        return Ok(false);
    }
    f.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    f.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

pub fn rfc3339(ms: u64) -> String {
    // Always three fraction digits, so the log's times line up and sort as text.
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// Reads a log. Lines that are not records (a torn last line after a crash, a hand edit)
/// are counted, not fatal.
pub fn read(path: &Path) -> std::io::Result<(Vec<Record>, usize)> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    let mut bad = 0;
    for line in BufReader::new(f).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(&line) {
            Ok(r) => out.push(r),
            Err(_) => bad += 1,
        }
    }
    Ok((out, bad))
}

/// One operation, folded from its records.
#[derive(Clone, Debug, PartialEq)]
pub struct OpSummary {
    pub op: String,
    pub first: String,
    pub last: String,
    pub context: String,
    pub user: String,
    pub kind: String,
    pub target: String,
    /// The last phase seen; `Confirmed`/`Step`/`Blocked`/`Log` with no outcome after it
    /// means interrupted.
    pub phase: Phase,
    pub message: String,
    pub steps: usize,
}

impl OpSummary {
    pub fn interrupted(&self) -> bool {
        !self.phase.is_outcome() && self.phase != Phase::Planned
    }
    pub fn state(&self) -> &'static str {
        if self.interrupted() {
            "INTERRUPTED"
        } else if self.phase == Phase::Planned {
            "previewed"
        } else {
            self.phase.as_str()
        }
    }
}

/// Groups records by operation, in order of first appearance.
pub fn summarize(records: &[Record]) -> Vec<OpSummary> {
    let mut out: Vec<OpSummary> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in records {
        let i = *index.entry(r.op.as_str()).or_insert_with(|| {
            out.push(OpSummary {
                op: r.op.clone(),
                first: r.time.clone(),
                last: r.time.clone(),
                context: r.context.clone(),
                user: r.user.clone(),
                kind: r.kind.clone(),
                target: r.target.clone(),
                phase: r.phase,
                message: String::new(),
                steps: 0,
            });
            out.len() - 1
        });
        let s = &mut out[i];
        s.last = r.time.clone();
        // A preview opened again after the operation ended does not reopen it.
        if !(s.phase.is_outcome() && r.phase == Phase::Planned) {
            s.phase = r.phase;
        }
        if r.phase == Phase::Step {
            s.steps += 1;
        }
        if !r.message.is_empty() && r.phase != Phase::Log {
            s.message = r.message.clone();
        }
        if s.user.is_empty() {
            s.user = r.user.clone();
        }
    }
    out
}

/// `fabrik audit` output: one line per operation (newest last), or every record.
pub fn render(records: &[Record], all: bool, limit: usize) -> String {
    let mut out = String::new();
    if all {
        let skip = records.len().saturating_sub(limit);
        for r in &records[skip..] {
            out.push_str(&format!(
                "{}  {:<10} {:<9} {:<9} {:<24} {}\n",
                r.time,
                r.op.rsplit('-').next().unwrap_or(""),
                r.kind,
                r.phase.as_str(),
                r.target,
                r.message
            ));
        }
        return out;
    }
    let ops: Vec<OpSummary> = summarize(records).into_iter().filter(|s| s.phase != Phase::Planned).collect();
    let skip = ops.len().saturating_sub(limit);
    out.push_str(&format!(
        "{:<24}  {:<10} {:<9} {:<24} {:<12} {:<11} {}\n",
        "STARTED", "CONTEXT", "OP", "TARGET", "USER", "STATE", "LAST MESSAGE"
    ));
    for s in &ops[skip..] {
        out.push_str(&format!(
            "{:<24}  {:<10} {:<9} {:<24} {:<12} {:<11} {}\n",
            s.first,
            s.context,
            s.kind,
            s.target,
            if s.user.is_empty() { "-" } else { &s.user },
            s.state(),
            s.message
        ));
    }
    let interrupted = ops.iter().filter(|s| s.interrupted()).count();
    if interrupted > 0 {
        out.push_str(&format!(
            "\n{interrupted} interrupted: they stopped without an outcome (quit, crash or lost connection). \
             Operations re-plan from the live cluster, so run them again from the cockpit to finish them.\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{OpKind, OpRequest, PlanDetail};

    fn plan() -> Plan {
        Plan {
            request: OpRequest::Cordon { node: "n1".into() },
            kind: OpKind::Cordon,
            title: "Cordon node n1".into(),
            target: "n1".into(),
            effects: vec!["set spec.unschedulable=true on n1".into()],
            warnings: Vec::new(),
            blockers: Vec::new(),
            detail: PlanDetail::Cordon { node: "n1".into(), cordon: true },
        }
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fabrik-audit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn records_round_trip_and_fold_into_operations() {
        let dir = tmp("fold");
        let a = Audit::new(&dir.join("nested"), "admin");
        let p = plan();
        a.record(1, &p, Phase::Planned, "").unwrap();
        a.record(1, &p, Phase::Confirmed, "").unwrap();
        a.record(1, &p, Phase::Step, "cordoned n1").unwrap();
        a.record(1, &p, Phase::Succeeded, "n1 is cordoned").unwrap();
        a.record(2, &p, Phase::Confirmed, "").unwrap();
        a.record(2, &p, Phase::Step, "cordoned n1").unwrap();
        let (recs, bad) = read(a.path()).unwrap();
        assert_eq!((recs.len(), bad), (6, 0));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "the audit log is its owner's only: {mode:o}");
        }
        assert_eq!(recs[1].effects, p.effects, "the confirmed record carries the preview");
        assert!(recs[2].effects.is_empty());
        let ops = summarize(&recs);
        assert_eq!(ops.len(), 2);
        assert_eq!((ops[0].phase, ops[0].steps, ops[0].interrupted()), (Phase::Succeeded, 1, false));
        assert!(ops[1].interrupted(), "confirmed without an outcome is interrupted");
        let text = render(&recs, false, 50);
        assert!(text.contains("INTERRUPTED"), "{text}");
        assert!(text.contains("1 interrupted"), "{text}");
        assert!(text.contains("succeeded"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_line_is_counted_not_fatal() {
        let dir = tmp("torn");
        let a = Audit::new(&dir, "admin");
        a.record(1, &plan(), Phase::Confirmed, "").unwrap();
        let mut f = OpenOptions::new().append(true).open(a.path()).unwrap();
        f.write_all(b"{\"time\":\"2026-").unwrap();
        let (recs, bad) = read(a.path()).unwrap();
        assert_eq!((recs.len(), bad), (1, 1));
        // The next record after a crash starts on its own line: the torn one is not its end.
        a.record(2, &plan(), Phase::Interrupted, "interrupted at cordoned n1").unwrap();
        let (recs, bad) = read(a.path()).unwrap();
        assert_eq!((recs.len(), bad), (2, 1));
        assert_eq!(recs[1].phase, Phase::Interrupted);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unwritable_log_names_the_path_and_the_fix() {
        let dir = tmp("ro");
        std::fs::create_dir_all(&dir).unwrap();
        // A directory where the file should be: the open fails whatever the user's rights.
        std::fs::create_dir_all(dir.join(FILE_NAME)).unwrap();
        let a = Audit::new(&dir, "admin");
        let e = a.record(1, &plan(), Phase::Confirmed, "").unwrap_err().to_string();
        assert!(e.contains(FILE_NAME) && e.contains("FABRIK_DATA_DIR"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(1_700_000_000_630), "2023-11-14T22:13:20.630Z", "fixed width");
        assert_eq!(rfc3339(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
    }
}
