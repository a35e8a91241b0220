//! Metal3 BareMetalHosts (when the CRDs are installed: where Metal3 provisions the hosts).

use kube::api::DynamicObject;

use super::{Translator, split};
use crate::model::Delta;

impl Translator {
    pub(super) fn host(&mut self, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        let h = o.and_then(|o| serde_json::to_value(o).ok()).and_then(|v| crate::cluster::metal3::host(&v));
        let (namespace, name) = split(key);
        // Hosts are often kept in Git: a power change through spec.online would be put back.
        let object = crate::model::gitops::key("baremetalhost", Some(&namespace), &name);
        self.managed(object, o.filter(|_| h.is_some()).map(|o| &o.metadata), out);
        match h {
            Some(h) => out.push(Delta::HostUpsert(h)),
            None => out.push(Delta::HostRemove { namespace, name }),
        }
    }
}
