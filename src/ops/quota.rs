//! Quota planning: parse and validate the new value (a Quantity; whole devices for
//! extended resources), compare it with what the tenant uses, and carry the version the
//! change is conditional on, so a concurrent edit is a conflict and never overwritten.

use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError, QuotaField, QuotaKey};
use crate::model::{Fleet, QuotaSource, QuotaSourceSpec};
use crate::quantity::{Quantity, QuantityError, parse_whole_count};

#[derive(Clone, Debug, PartialEq)]
pub struct QuotaPlan {
    pub tenant: String,
    pub key: QuotaKey,
    /// `None`: the limit is not set (Kueue's borrowing and lending limits).
    pub old: Option<Quantity>,
    pub new: Quantity,
    /// The version the change is conditional on (resourceVersion on a cluster).
    pub expected_version: String,
}

/// A limit as people read it: its value, or `unset`.
pub fn shown(q: Option<Quantity>) -> String {
    q.map(|q| q.to_string()).unwrap_or_else(|| "unset".into())
}

/// Extended resources (GPUs, MIG devices, DRA device counts) are whole devices.
pub fn is_extended(resource: &str) -> bool {
    let r = resource.trim_start_matches("requests.").trim_start_matches("limits.");
    r.contains("nvidia.com/")
        || r.ends_with(".deviceclass.resource.k8s.io/devices")
        || (r.contains('/') && !r.starts_with("kubernetes.io/"))
}

pub(super) fn plan(
    fleet: &Fleet,
    tenant: &str,
    key: &QuotaKey,
    value: &str,
    request: OpRequest,
) -> Result<Plan, PlanError> {
    let tid = fleet.tenant_by_name(tenant).ok_or_else(|| PlanError::TenantNotFound(tenant.to_string()))?;
    let t = fleet.tenant(tid).ok_or_else(|| PlanError::TenantNotFound(tenant.to_string()))?;
    let not_found = || PlanError::QuotaNotFound { tenant: tenant.to_string(), resource: key.resource.clone() };
    let q = t
        .quotas
        .iter()
        .filter_map(|&i| fleet.quota(i))
        .find(|q| fleet.str_of(q.resource) == key.resource && source_matches(fleet, &q.source, &key.source))
        .ok_or_else(not_found)?;
    let value = value.trim();
    let field = key.field;
    if field != QuotaField::Hard && matches!(key.source, QuotaSourceSpec::ResourceQuota { .. }) {
        return Err(PlanError::Invalid(format!(
            "a ResourceQuota has one limit per resource (spec.hard); {} belongs to Kueue ClusterQueues — type just the value",
            field.kueue_name()
        )));
    }
    let old = match field {
        QuotaField::Hard => Some(q.hard),
        QuotaField::BorrowingLimit => q.borrowing_limit,
        QuotaField::LendingLimit => q.lending_limit,
    };
    let new = if is_extended(&key.resource) {
        parse_whole_count(value)?
    } else {
        let v = Quantity::parse(value)?;
        if v.is_negative() {
            return Err(PlanError::BadQuantity(QuantityError::Negative { input: value.to_string() }));
        }
        v
    };
    let mut warnings = Vec::new();
    let mut blockers = Vec::new();
    let gpu = fleet.is_gpu_resource(q.resource);
    let requested = if gpu { Some(t.usage.requested_gpus as i64) } else { None };
    let used = q.used.value().max(requested.unwrap_or(0));
    let (what, where_) = match &key.source {
        QuotaSourceSpec::ResourceQuota { namespace, name } => {
            (key.resource.clone(), format!("ResourceQuota {namespace}/{name}"))
        }
        QuotaSourceSpec::ClusterQueue { queue, flavor } => {
            (format!("{} {}", key.resource, field.kueue_name()), format!("ClusterQueue {queue} flavor {flavor}"))
        }
    };
    if old == Some(new) {
        warnings.push(format!("{what} is already {new}: nothing would change"));
    }
    match field {
        QuotaField::Hard => {
            if new.value() < used {
                warnings.push(format!(
                    "{new} is below what {tenant} uses now ({used}): running pods keep running, but new pods are refused until usage falls under it"
                ));
            }
            if gpu && new.value() > fleet.totals.gpus as i64 {
                warnings.push(format!("{new} is more than the fleet's {} GPUs", fleet.totals.gpus));
            }
            if let Some(l) = q.lending_limit.filter(|l| l.value() > new.value()) {
                blockers.push(format!(
                    "nominalQuota {new} would be below the lendingLimit {l}, which Kueue refuses: lower lendingLimit first (lending {new})"
                ));
            }
        }
        QuotaField::LendingLimit => {
            if new.value() > q.hard.value() {
                blockers.push(format!(
                    "lendingLimit {new} is more than the nominalQuota {}: Kueue refuses it (a queue lends only what it has)",
                    q.hard
                ));
            }
        }
        QuotaField::BorrowingLimit => warnings.push(format!(
            "a borrowing limit applies only when ClusterQueue belongs to a cohort; {tenant} may then borrow up to {new} beyond its nominal quota"
        )),
    }
    let effects = vec![
        format!("{where_}: {what} {} → {new}", shown(old)),
        format!(
            "in use now: {} (cluster status), {} GPUs requested by the tenant's pods",
            q.used, t.usage.requested_gpus
        ),
        format!(
            "the change applies only if the quota is still at version {} — a concurrent edit is reported as a conflict",
            &q.version
        ),
    ];
    Ok(Plan {
        request,
        kind: OpKind::SetQuota,
        title: match field {
            QuotaField::Hard => format!("Set {} quota of {tenant} to {new}", key.resource),
            f => format!("Set {} {} of {tenant} to {new}", key.resource, f.kueue_name()),
        },
        target: format!("{tenant} {}", key.resource),
        effects,
        warnings,
        blockers,
        detail: PlanDetail::Quota(QuotaPlan {
            tenant: tenant.to_string(),
            key: key.clone(),
            old,
            new,
            expected_version: q.version.to_string(),
        }),
    })
}

pub(crate) fn source_matches(fleet: &Fleet, a: &QuotaSource, b: &QuotaSourceSpec) -> bool {
    match (a, b) {
        (
            QuotaSource::ResourceQuota { namespace, name },
            QuotaSourceSpec::ResourceQuota { namespace: n2, name: m2 },
        ) => fleet.str_of(*namespace) == n2 && fleet.str_of(*name) == m2,
        (QuotaSource::ClusterQueue { queue, flavor }, QuotaSourceSpec::ClusterQueue { queue: q2, flavor: f2 }) => {
            fleet.str_of(*queue) == q2 && fleet.str_of(*flavor) == f2
        }
        _ => false,
    }
}

/// The spec form of a stored quota source, for building requests from the fleet.
pub fn source_spec(fleet: &Fleet, s: &QuotaSource) -> QuotaSourceSpec {
    match s {
        QuotaSource::ResourceQuota { namespace, name } => QuotaSourceSpec::ResourceQuota {
            namespace: fleet.str_of(*namespace).to_string(),
            name: fleet.str_of(*name).to_string(),
        },
        QuotaSource::ClusterQueue { queue, flavor } => QuotaSourceSpec::ClusterQueue {
            queue: fleet.str_of(*queue).to_string(),
            flavor: fleet.str_of(*flavor).to_string(),
        },
    }
}
