//! GitOps ownership of the objects fabrik may change (nodes, ResourceQuotas,
//! ClusterQueues): read from each object's labels and annotations, passed on when it
//! changes, so previews can warn before a change Argo CD or Flux will put back.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Translator;
use crate::model::{Delta, GitOpsOwner};

/// The owner an object's metadata names, if any.
pub(super) fn owner_of(meta: &ObjectMeta) -> Option<GitOpsOwner> {
    // Most objects carry no marker: look for one before collecting anything (every node
    // update passes here).
    let marked = |m: Option<&std::collections::BTreeMap<String, String>>| {
        m.is_some_and(|m| m.keys().any(|k| GitOpsOwner::is_marker(k)))
    };
    if !marked(meta.labels.as_ref()) && !marked(meta.annotations.as_ref()) {
        return None;
    }
    GitOpsOwner::detect(pairs(meta.labels.as_ref()), pairs(meta.annotations.as_ref()))
}

fn pairs(m: Option<&std::collections::BTreeMap<String, String>>) -> Vec<(&str, &str)> {
    m.into_iter().flatten().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

impl Translator {
    /// Says who owns `object` (a [`crate::model::gitops::key`]) when that changed; `meta`
    /// is `None` once the object is gone.
    pub(super) fn managed(&mut self, object: String, meta: Option<&ObjectMeta>, out: &mut Vec<Delta>) {
        let owner = meta.and_then(owner_of);
        if self.gitops.get(&object) == owner.as_ref() {
            return;
        }
        match &owner {
            Some(o) => self.gitops.insert(object.clone(), o.clone()),
            None => self.gitops.remove(&object),
        };
        out.push(Delta::Managed { object, owner });
    }
}
