//! GPU taints on the simulated world, as the API server, the scheduler and the device taint
//! eviction controller treat a `DeviceTaintRule`: the rule is stored and shows on the GPU's
//! DRA facts; `NoExecute` deletes (gracefully) the pods using the GPU.

use super::world::Sim;
use crate::model::DeviceTaint;
use crate::ops::taint::TAINT_KEY;
use crate::ops::{RuleSpec, TaintEffect, TaintPlan};

impl Sim {
    /// Creates a rule; `Ok(false)` when one of that name selects and taints the same already.
    pub(super) fn create_taint_rule(&mut self, plan: &TaintPlan, rule: &RuleSpec) -> Result<bool, String> {
        let effect = plan.effect.unwrap_or(TaintEffect::NoSchedule);
        let taint = DeviceTaint {
            key: TAINT_KEY.into(),
            value: plan.value.clone(),
            effect: effect.as_str().into(),
            device: rule.device.clone(),
            rule: Some(rule.name.clone()),
            since: Some(self.now),
        };
        if let Some((uuid, have)) = self.dra.rules.get(&rule.name) {
            let same = *uuid == plan.uuid
                && (&have.key, &have.value, &have.effect, &have.device)
                    == (&taint.key, &taint.value, &taint.effect, &taint.device);
            return if same {
                Ok(false)
            } else {
                Err(format!(
                    "DeviceTaintRule {} exists with another selector or taint ({}); nothing was overwritten",
                    rule.name,
                    have.text()
                ))
            };
        }
        self.dra.rules.insert(rule.name.clone(), (plan.uuid.clone(), taint));
        if effect == TaintEffect::NoExecute {
            // The device taint eviction controller: the pods using the GPU are deleted.
            for key in self.pods_on_gpu(&plan.uuid) {
                self.terminate_pod(&key);
            }
        }
        self.dra_sync();
        Ok(true)
    }

    pub(super) fn taint_rule_exists(&self, name: &str) -> bool {
        self.dra.rules.contains_key(name)
    }

    pub(super) fn delete_taint_rule(&mut self, name: &str) -> bool {
        let existed = self.dra.rules.remove(name).is_some();
        self.dra_sync();
        existed
    }

    /// Keys of the pods bound to GPU `uuid` (whole, a share, or one of its MIG instances).
    pub(super) fn pods_on_gpu(&self, uuid: &str) -> Vec<String> {
        let Some(g) = self.nodes.iter().flat_map(|n| n.gpus.iter()).find(|g| g.spec.uuid == uuid) else {
            return Vec::new();
        };
        let mut keys: Vec<String> =
            g.owner.iter().chain(g.holders.iter()).chain(g.inst_owner.iter().flatten()).cloned().collect();
        keys.extend(
            self.pods.iter().filter(|(_, p)| p.spec.bound_gpus.iter().any(|u| u == uuid)).map(|(k, _)| k.clone()),
        );
        keys.sort();
        keys.dedup();
        keys.retain(|k| self.pods.contains_key(k));
        keys
    }
}
