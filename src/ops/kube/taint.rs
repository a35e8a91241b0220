//! DeviceTaintRules (`resource.k8s.io/v1alpha3`, `DRADeviceTaints`) for a GPU taint, and the
//! look at which pods use the GPU (the claims that hold its devices).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::resource::v1alpha3::{DeviceTaint, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::super::exec::{Run, Step, Stop};
use super::super::retry;
use super::super::taint::TAINT_KEY;
use super::super::target::ReadFailure;
use super::super::{RuleSpec, TaintPlan};
use super::call::Kube;
use super::{FIELD_MANAGER, api_failure, read_failure};
use crate::cluster::labels;

/// The rule as fabrik writes it.
pub fn rule_object(plan: &TaintPlan, rule: &RuleSpec) -> DeviceTaintRule {
    let effect = plan.effect.map_or("NoSchedule", |e| e.as_str());
    DeviceTaintRule {
        metadata: kube::api::ObjectMeta {
            name: Some(rule.name.clone()),
            labels: Some([("app.kubernetes.io/managed-by".to_string(), "fabrik".to_string())].into()),
            annotations: Some([("fabrik.io/gpu-taint-of".to_string(), plan.label())].into()),
            ..Default::default()
        },
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some(labels::DRA_DRIVER.to_string()),
                pool: Some(rule.pool.clone()),
                device: Some(rule.device.clone()),
                ..Default::default()
            }),
            taint: DeviceTaint {
                key: TAINT_KEY.to_string(),
                value: (!plan.value.is_empty()).then(|| plan.value.clone()),
                effect: effect.to_string(),
                time_added: None,
            },
        },
    }
}

/// Whether a rule on the server selects and taints as fabrik's would.
fn same(have: &DeviceTaintRule, want: &DeviceTaintRule) -> bool {
    let sel = |r: &DeviceTaintRule| {
        r.spec.device_selector.as_ref().map(|s| (s.driver.clone(), s.pool.clone(), s.device.clone()))
    };
    let taint =
        |r: &DeviceTaintRule| (r.spec.taint.key.clone(), r.spec.taint.value.clone(), r.spec.taint.effect.clone());
    sel(have) == sel(want) && taint(have) == taint(want)
}

impl Kube {
    pub(super) async fn create_rule(&self, run: &mut Run<'_>, plan: &TaintPlan, rule: &RuleSpec) -> Step<bool> {
        let api: Api<DeviceTaintRule> = Api::all(self.client.clone());
        let want = rule_object(plan, rule);
        let what = format!("creating DeviceTaintRule {}", rule.name);
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match self.mutate(run, &what, retry::transient, || api.create(&pp, &want)).await? {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // There already: ours from an answer that got lost, or someone else's.
                let read = format!("reading DeviceTaintRule {}", rule.name);
                let have = self
                    .call(run, &read, retry::transient, || api.get_opt(&rule.name))
                    .await?
                    .map_err(|e| Stop::Failed(api_failure(&read, &e)))?;
                match have {
                    Some(h) if same(&h, &want) => Ok(false),
                    Some(h) => Err(Stop::Failed(format!(
                        "DeviceTaintRule {} exists with another selector or taint ({} {}:{}); nothing was \
                         overwritten — look at it with kubectl get devicetaintrule {} -o yaml",
                        rule.name,
                        h.spec.taint.key,
                        h.spec.taint.value.clone().unwrap_or_default(),
                        h.spec.taint.effect,
                        rule.name
                    ))),
                    // Gone between the two calls: try again from the start.
                    None => Box::pin(self.create_rule(run, plan, rule)).await,
                }
            }
            Err(e) => Err(Stop::Failed(api_failure(&what, &e))),
        }
    }

    pub(super) async fn rule_exists(&self, run: &mut Run<'_>, name: &str) -> Step<Result<bool, ReadFailure>> {
        let api: Api<DeviceTaintRule> = Api::all(self.client.clone());
        let what = format!("reading DeviceTaintRule {name}");
        Ok(match self.call(run, &what, retry::transient, || api.get_opt(name)).await? {
            Ok(r) => Ok(r.is_some()),
            Err(e) => Err(read_failure(&what, &e)),
        })
    }

    pub(super) async fn delete_rule(&self, run: &mut Run<'_>, name: &str) -> Step<bool> {
        let api: Api<DeviceTaintRule> = Api::all(self.client.clone());
        let what = format!("deleting DeviceTaintRule {name}");
        let dp = DeleteParams::default();
        match self.mutate(run, &what, retry::transient, || api.delete(name, &dp)).await? {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(Stop::Failed(api_failure(&what, &e))),
        }
    }

    /// The pods the cluster says use any of `devices` of `pool`: every ResourceClaim whose
    /// allocation names one of them, reserved for a pod that still exists (same uid).
    pub(super) async fn pods_using(
        &self,
        run: &mut Run<'_>,
        pool: &str,
        devices: &[String],
    ) -> Step<Result<Vec<String>, ReadFailure>> {
        let claims: Api<ResourceClaim> = Api::all(self.client.clone());
        let what = "listing ResourceClaims".to_string();
        // From the API server's watch cache: each look is cheap for it.
        let lp = ListParams::default().match_any();
        let list = match self.call(run, &what, retry::transient, || claims.list(&lp)).await? {
            Ok(l) => l,
            Err(e) => return Ok(Err(read_failure(&what, &e))),
        };
        let mut holders: Vec<(String, String, String)> = Vec::new();
        for c in list.items {
            let Some(status) = c.status else { continue };
            let on_device = status
                .allocation
                .and_then(|a| a.devices)
                .is_some_and(|d| d.results.iter().flatten().any(|r| r.pool == pool && devices.contains(&r.device)));
            if !on_device {
                continue;
            }
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            for r in status.reserved_for.iter().flatten().filter(|r| r.resource == "pods") {
                holders.push((ns.clone(), r.name.clone(), r.uid.clone()));
            }
        }
        let mut using = Vec::new();
        for (ns, name, uid) in holders {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            let what = format!("reading pod {ns}/{name}");
            match self.call(run, &what, retry::transient, || pods.get_opt(&name)).await? {
                Ok(Some(p)) if p.metadata.uid.as_deref() == Some(uid.as_str()) => using.push(format!("{ns}/{name}")),
                Ok(_) => {}
                Err(e) => return Ok(Err(read_failure(&what, &e))),
            }
        }
        using.sort();
        using.dedup();
        Ok(Ok(using))
    }
}
